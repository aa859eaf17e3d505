// The `heap` concept every layer is written against, and the traits layers use
// to forward what a parent optionally has.
//
// Required (D's std.experimental.allocator style: only what allocation needs):
//   h.allocate(r)  -> void*   throws std::bad_alloc on failure
//   h.try_allocate(r) -> void*   nullptr on failure
//   h.deallocate(p, r) -> void   sized: r carries the size/alignment given to allocate
//   ch.good_size(n, a) -> size_t   the usable size serving (n, a), 0 = cannot serve
//   H::max_alignment               the largest alignment a request may ask for
// Optional, forwarded by a layer only when its parent has them (requires-guarded
// members): deallocate(p) without a size, usable_size(p), deallocate_all(),
// deallocate_run(ps, n, r), trim(), stats(), last_allocation(), owns(p),
// owner_of(p) / set_owner_tag(tag) (which heap holds a block: per_thread needs
// them), try_resize, and the constants granularity / locality_aware.
#pragma once
#include <concepts>
#include <cstddef>

#include <allotheque/request.hpp>

namespace allotheque::layers {

template <class H>
concept heap = requires(H& h, const H& ch, const request& r, void* p, std::size_t n) {
    { h.allocate(r) } -> std::same_as<void*>;
    { h.try_allocate(r) } -> std::same_as<void*>;
    { h.deallocate(p, r) } -> std::same_as<void>;
    { ch.good_size(n, n) } -> std::convertible_to<std::size_t>;
    { H::max_alignment } -> std::convertible_to<std::size_t>;
};

// Optional capabilities, one concept each.
template <class H>
concept has_deallocate_all = requires(H& h) { h.deallocate_all(); };
template <class H>
concept has_stats = requires(const H& h) { h.stats(); };
template <class H>
concept has_last_allocation = requires(const H& h) {
    { h.last_allocation() } -> std::convertible_to<const void*>;
};
template <class H>
concept has_owns = requires(const H& h, const void* p) {
    { h.owns(p) } -> std::convertible_to<bool>;
};
template <class H>
concept has_deallocate_run = requires(H& h, void* const* ps, std::size_t n, const request& r) {
    h.deallocate_run(ps, n, r);
};
template <class H>
concept has_unsized_deallocate = requires(H& h, void* p) { h.deallocate(p); };
template <class H>
concept has_usable_size = requires(const H& h, const void* p) {
    { h.usable_size(p) } -> std::convertible_to<std::size_t>;
};
template <class H>
concept has_trim = requires(H& h) {
    { h.trim() } -> std::convertible_to<std::size_t>;
};
// Which heap holds a block: owner_of(p) answers for any heap of its kind, and
// set_owner_tag(tag) chooses what this heap's blocks answer.
template <class H>
concept has_owner = requires(H& h, const void* p) {
    { H::owner_of(p) } -> std::convertible_to<const void*>;
    h.set_owner_tag(p);
};

// Constants with fallbacks: granularity 1 and locality_aware false when absent.
template <class H>
inline constexpr std::size_t granularity_of = 1;
template <class H>
    requires requires { H::granularity; }
inline constexpr std::size_t granularity_of<H> = H::granularity;

template <class H>
inline constexpr bool locality_aware_of = false;
template <class H>
    requires requires { H::locality_aware; }
inline constexpr bool locality_aware_of<H> = H::locality_aware;

} // namespace allotheque::layers
