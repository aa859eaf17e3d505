// The partition (container) concept. A partition keeps free chunks in classes
// of one attribute and delegates each class to a nested partition; the terminal
// `list<void>` keeps the chunks themselves.
//
// Everything is static over a `header_type`: the state a parent keeps for one of
// its classes (a list head, a tree root, a table). A class node that a container
// needs (a list or tree node carrying the class's value and its nested header)
// lives inside one free chunk of that class, its host, so the smallest chunk a
// partition expression can hold is the largest node any level puts in a chunk.
#pragma once
#include <concepts>
#include <cstddef>
#include <cstdint>

#include <allotheque/attributes/attribute.hpp>
#include <allotheque/detail/bits.hpp>
#include <allotheque/request.hpp>

namespace allotheque {

// One named requirement per member, so that a compiler's note on a type that
// is not a partition names the member it lacks.
namespace requirements {
template <class C>
concept partition_has_header_type = requires { typename C::header_type; };
template <class C>   // compile-time: bytes a free chunk must offer
concept partition_declares_min_chunk = requires { { C::min_chunk } -> std::convertible_to<std::size_t>; };
template <class C>   // a found chunk always has the requested size
concept partition_declares_size_exact = requires { { C::size_exact } -> std::convertible_to<bool>; };
template <class C>   // no address level insists on one class (see heap)
concept partition_declares_address_safe = requires { { C::address_safe } -> std::convertible_to<bool>; };
template <class C>   // the header can live in a chunk (no system resources)
concept partition_declares_stored_in_chunks = requires { { C::stored_in_chunks } -> std::convertible_to<bool>; };
template <class C>   // accepts() looks at a chunk's size
concept partition_declares_reads_size = requires { { C::reads_size } -> std::convertible_to<bool>; };
template <class C>   // some level partitions by address (uses hints)
concept partition_declares_reads_address = requires { { C::reads_address } -> std::convertible_to<bool>; };
template <class C>   // make an empty header in raw storage
concept partition_has_init = requires(typename C::header_type& h) { C::init(h); };
template <class C>   // release what the header holds (mapped tables)
concept partition_has_destroy = requires(typename C::header_type& h) { C::destroy(h); };
template <class C>   // metadata for chunks in [p, p+n) exists; false: no memory
concept partition_has_prepare = requires(typename C::header_type& h, std::byte* p, std::size_t n) {
    { C::prepare(h, p, n) } -> std::same_as<bool>;
};
template <class C>   // nullptr: nothing fits
concept partition_has_allocate = requires(typename C::header_type& h, const request& r) {
    { C::allocate(h, r) } -> std::same_as<std::byte*>;
};
template <class C>   // give chunk [p, p+n) back to its classes
concept partition_has_deallocate = requires(typename C::header_type& h, std::byte* p, std::size_t n) {
    C::deallocate(h, p, n);
};
template <class C>
concept partition_has_empty = requires(const typename C::header_type& h) { { C::empty(h) } -> std::same_as<bool>; };
template <class C>   // could chunk [p, p+n) serve r at this level and below?
concept partition_has_accepts = requires(std::byte* p, std::size_t n, const request& r) {
    { C::accepts(p, n, r) } -> std::same_as<bool>;
};
template <class C>   // the chunk size that serves a request of n bytes
concept partition_has_round_size = requires(std::size_t n) { { C::round_size(n) } -> std::same_as<std::size_t>; };
} // namespace requirements

template <class C>
concept partition =
    requirements::partition_has_header_type<C> && requirements::partition_declares_min_chunk<C> &&
    requirements::partition_declares_size_exact<C> && requirements::partition_declares_address_safe<C> &&
    requirements::partition_declares_stored_in_chunks<C> && requirements::partition_declares_reads_size<C> &&
    requirements::partition_declares_reads_address<C> && requirements::partition_has_init<C> &&
    requirements::partition_has_destroy<C> && requirements::partition_has_prepare<C> &&
    requirements::partition_has_allocate<C> && requirements::partition_has_deallocate<C> &&
    requirements::partition_has_empty<C> && requirements::partition_has_accepts<C> &&
    requirements::partition_has_round_size<C>;

// A partition that stacks its chunks (optional trait `returns_last_free`): an
// allocation of n bytes made right after a free of an n-byte chunk returns
// that chunk. A parent can then keep the last free aside (hash_table does).
template <class C>
inline constexpr bool partition_returns_last_free = false;
template <class C>
    requires requires { C::returns_last_free; }
inline constexpr bool partition_returns_last_free<C> = bool(C::returns_last_free);

// Range deallocation (optional member of a partition):
//   C::deallocate_run(h, ps, count, n) gives back chunks ps[0..count) of n bytes
// each. A class container finds the class of a run of consecutive chunks that
// share it once and hands the whole run down; the terminal list links them.
// `deallocate_run_in<C>` uses the member when C has one, else one by one.
template <class C>
void deallocate_run_in(typename C::header_type& h, std::byte* const* ps, std::size_t count, std::size_t n) noexcept {
    if constexpr (requires { C::deallocate_run(h, ps, count, n); }) {
        C::deallocate_run(h, ps, count, n);
    } else {
        for (std::size_t i = 0; i < count; ++i) C::deallocate(h, ps[i], n);
    }
}

// Range deallocation of consecutive chunks (optional member of a partition):
//   C::deallocate_range(h, p, count, n) gives back chunks p, p + n, ...,
// p + (count - 1) * n, as if freed from the highest down: p ends on top, so
// that allocations walk upwards (a heap's refill). A class container finds
// where the class changes and hands each stretch down; the terminal list
// links the chunks in place, with no array of addresses to read back.
// `deallocate_range_in<C>` uses the member when C has one, else one by one.
template <class C>
void deallocate_range_in(typename C::header_type& h, std::byte* p, std::size_t count, std::size_t n) noexcept {
    if constexpr (requires { C::deallocate_range(h, p, count, n); }) {
        C::deallocate_range(h, p, count, n);
    } else {
        for (std::size_t j = count; j-- > 0;) C::deallocate(h, p + j * n, n);
    }
}

// Of chunks p, p + n, ..., p + (count - 1) * n: how many at the top end share
// the last one's class of `Attr` (`key(c)`: the class index of chunk c). One
// size is one class; an address attribute whose classes are aligned blocks
// (class_bytes) ends the stretch where the last chunk's block starts (a class
// met again further down, by aliasing, is another stretch); else each chunk
// is asked.
template <class Attr, class Key>
std::size_t same_class_tail(std::byte* p, std::size_t count, std::size_t n, Key&& key) noexcept {
    if constexpr (size_attribute<Attr>) {
        return count;
    } else if constexpr (requires { requires Attr::class_bytes != 0; }) {
        const std::uintptr_t first = detail::address_of(p);
        const std::uintptr_t block = (first + (count - 1) * n) & ~std::uintptr_t{Attr::class_bytes - 1};
        return block <= first ? count : count - (block - first + n - 1) / n;
    } else {
        std::byte* const last = p + (count - 1) * n;
        const auto v = key(last);
        std::size_t j = 1;
        while (j < count && key(last - j * n) == v) ++j;
        return j;
    }
}

// Length of the run of chunks from ps[0] whose class `key(p)` equals the first's.
template <class Key>
std::size_t same_class_run(std::byte* const* ps, std::size_t count, Key&& key) noexcept {
    const auto v = key(ps[0]);
    std::size_t j = 1;
    while (j < count && key(ps[j]) == v) ++j;
    return j;
}

} // namespace allotheque
