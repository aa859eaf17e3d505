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

#include <allotheque/request.hpp>

namespace allotheque {

template <class C>
concept partition = requires(typename C::header_type& h, const typename C::header_type& ch, std::byte* p,
                             std::size_t n, const request& r) {
    typename C::header_type;
    { C::min_chunk } -> std::convertible_to<std::size_t>;   // compile-time: bytes a free chunk must offer
    { C::size_exact } -> std::convertible_to<bool>;         // a found chunk always has the requested size
    { C::init(h) };                                         // make an empty header in raw storage
    { C::destroy(h) };                                      // release what the header holds (mapped tables)
    { C::prepare(h, p, n) } -> std::same_as<bool>;          // metadata for chunks in [p, p+n) exists; false: no memory
    { C::address_safe } -> std::convertible_to<bool>;       // no address level insists on one class (see heap)
    { C::stored_in_chunks } -> std::convertible_to<bool>;   // header can live in a chunk (no system resources)
    { C::reads_size } -> std::convertible_to<bool>;         // accepts() looks at a chunk's size
    { C::reads_address } -> std::convertible_to<bool>;      // some level partitions by address (uses hints)
    { C::allocate(h, r) } -> std::same_as<std::byte*>;      // nullptr: nothing fits
    { C::deallocate(h, p, n) };                             // give chunk [p, p+n) back to its classes
    { C::empty(ch) } -> std::same_as<bool>;
    { C::accepts(p, n, r) } -> std::same_as<bool>;          // could chunk [p, p+n) serve r at this level and below?
    { C::round_size(n) } -> std::same_as<std::size_t>;      // the chunk size that serves a request of n bytes
};

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

// Length of the run of chunks from ps[0] whose class `key(p)` equals the first's.
template <class Key>
std::size_t same_class_run(std::byte* const* ps, std::size_t count, Key&& key) noexcept {
    const auto v = key(ps[0]);
    std::size_t j = 1;
    while (j < count && key(ps[j]) == v) ++j;
    return j;
}

} // namespace allotheque
