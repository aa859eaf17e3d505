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

template <class H, class Attr>
concept hash_function = requires(typename Attr::value_type v) {
    { H::template index_of<Attr>(v) } -> std::convertible_to<std::size_t>;
    typename H::template index<Attr, int, hash_init_placeholder>;
    { H::exact } -> std::convertible_to<bool>;
};

// Hashes that segregate sizes also round a request to its class's chunk size.
template <class H>
concept size_segregation = requires(std::size_t n) {
    { H::round(n) } -> std::same_as<std::size_t>;
};

// A size's class index and the chunk size serving it, found together: a heap
// resolves a request once and hands both down (hash_table reads the index from
// the request instead of hashing the size again).
struct size_class {
    std::size_t size;
    std::size_t index;
};
// Size hashes may compute both in one step (`classify`); the others get
// round() then index_of().
template <class H, class Attr>
constexpr size_class classify_size(std::size_t n) noexcept {
    if constexpr (requires { H::classify(n); }) {
        return H::classify(n);
    } else {
        const std::size_t s = H::round(n);
        return {s, static_cast<std::size_t>(H::template index_of<Attr>(s))};
    }
}

} // namespace allotheque
