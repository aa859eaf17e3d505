// The hash-function concept of `hash_table`: maps an attribute value to a class
// index and chooses the index structure. Size hashes also say which chunk size
// serves a class (`round`) and whether each class holds a single size (`exact`).
#pragma once
#include <concepts>
#include <cstddef>

namespace allotheque {

struct hash_init_placeholder {
    template <class H>
    void operator()(H&) const noexcept {}
};

// What a hash table needs of the structure a hash chooses for its classes
// (dense_index, sparse_index and direct_index in containers/class_index.hpp).
template <class I, class Header>
concept class_index = requires(I& i, const I& ci, std::size_t k) {
    { I::classes } -> std::convertible_to<std::size_t>;   // class indices lie in [0, classes)
    { i.find(k) } -> std::same_as<Header*>;               // the live class k, or nullptr
    { ci.contains(k) } -> std::same_as<bool>;             // class k is live
    { i.obtain(k) } -> std::same_as<Header&>;             // class k, made live (header built) if it was not
    i.release(k);                                         // class k is empty: no longer live
    { ci.first() } -> std::same_as<std::size_t>;          // the lowest live class, or npos
    { ci.next(k) } -> std::same_as<std::size_t>;          // the lowest live class above k, or npos
    { i.prepare(k, k) } -> std::same_as<bool>;            // storage for classes [lo, hi]; false: no memory
    { ci.metadata_bytes() } -> std::convertible_to<std::size_t>;
};

// A size's class index and the chunk size serving it, found together: a heap
// resolves a request once and hands both down (hash_table reads the index from
// the request instead of hashing the size again).
struct size_class {
    std::size_t size;
    std::size_t index;
};
// One named requirement each, so that a compiler's note on a type that is not
// a hash function names the member it lacks.
namespace requirements {
template <class H, class Attr>
concept hash_has_index_of = requires(typename Attr::value_type v) {
    { H::template index_of<Attr>(v) } -> std::convertible_to<std::size_t>;
};
template <class H, class Attr>
concept hash_has_index_template = requires { typename H::template index<Attr, int, hash_init_placeholder>; };
template <class H, class Attr>
concept hash_index_is_a_class_index =
    class_index<typename H::template index<Attr, int, hash_init_placeholder>, int>;
template <class H>
concept hash_declares_exact = requires { { H::exact } -> std::convertible_to<bool>; };
template <class H>   // optional: when present, it returns both answers
concept hash_classify_returns_size_class = !requires(std::size_t n) { H::classify(n); } || requires(std::size_t n) {
    { H::classify(n) } -> std::same_as<size_class>;
};
} // namespace requirements

// index_of<Attr>(v): the class of attribute value v; index<Attr, Header, Init>:
// the class_index holding one Header per class (Init builds one); exact: each
// class holds one attribute value (for sizes: one chunk size); optionally
// classify(n), a size's chunk size and class in one step.
template <class H, class Attr>
concept hash_function = requirements::hash_has_index_of<H, Attr> && requirements::hash_has_index_template<H, Attr> &&
                        requirements::hash_index_is_a_class_index<H, Attr> && requirements::hash_declares_exact<H> &&
                        requirements::hash_classify_returns_size_class<H>;

// Hashes that segregate sizes also round a request to its class's chunk size.
template <class H>
concept size_segregation = requires(std::size_t n) {
    { H::round(n) } -> std::same_as<std::size_t>;
};

// Size hashes may compute both in one step (`classify`); the others get
// round() then index_of().
template <class H, class Attr>
[[gnu::always_inline]] constexpr size_class classify_size(std::size_t n) noexcept {
    if constexpr (requires { H::classify(n); }) {
        return H::classify(n);
    } else {
        const std::size_t s = H::round(n);
        return {s, static_cast<std::size_t>(H::template index_of<Attr>(s))};
    }
}

} // namespace allotheque
