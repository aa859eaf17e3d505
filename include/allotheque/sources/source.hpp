// The source concept: where a heap's back end gets system memory.
//
// Required:
//   s.allocate(n, near) -> void*   n bytes (n a multiple of the page size),
//                                  page-aligned, or nullptr when the system
//                                  refuses; `near` is an address the memory
//                                  should be close to (a source may ignore it)
//   s.deallocate(p, n)             takes back exactly a range allocate returned
// Optional (the back end uses them when present):
//   S::zeroed                      fresh memory reads as zero (calloc need not clear it)
//   s.decommit(p, n) -> bool       gives the pages of [p, p+n) (inside a range
//                                  it handed out) back to the system while the
//                                  range stays valid and reads as zero
//                                  afterwards; false: nothing was done
//   S::thread_safe                 allocate/deallocate may be called from any
//                                  thread at once (shared sources such as
//                                  arena_source); heaps need no lock around it
//   s.extend(p, n, more) -> bool   grows [p, p+n), a range it handed out (or
//                                  grew), by the `more` bytes right after it
//                                  when they are free; nothing moves. False:
//                                  nothing was done. deallocate then takes
//                                  the grown range back whole
//   s.allocate_apart(n) -> void*   n bytes as allocate, in a mapping of
//                                  their own: where move puts a block
//   s.move(from, n, to, m) -> bool moves the pages of [from, from+n) to the
//                                  start of [to, to+m) (n <= m; `from` a
//                                  range it handed out, `to` one of
//                                  allocate_apart's, else the caller's bug)
//                                  without copying them;
//                                  the rest of `to` reads as zero, and `from`
//                                  is taken back as by deallocate. False:
//                                  `from` is untouched and `to` taken back
//                                  (the caller no longer owns it)
#pragma once
#include <concepts>
#include <cstddef>

namespace allotheque {

template <class S>
concept source = requires(S& s, std::size_t n, const void* near, void* p) {
    { s.allocate(n, near) } -> std::same_as<void*>;
    { s.deallocate(p, n) } -> std::same_as<void>;
};

template <class S>
inline constexpr bool source_zeroed = false;
template <class S>
    requires requires { S::zeroed; }
inline constexpr bool source_zeroed<S> = S::zeroed;

template <class S>
concept extending_source = source<S> && requires(S& s, void* p, std::size_t n) {
    { s.extend(p, n, n) } -> std::same_as<bool>;
};

template <class S>
concept moving_source = source<S> && requires(S& s, void* p, std::size_t n) {
    { s.allocate_apart(n) } -> std::same_as<void*>;
    { s.move(p, n, p, n) } -> std::same_as<bool>;
};

template <class S>
concept decommitting_source = source<S> && requires(S& s, void* p, std::size_t n) {
    { s.decommit(p, n) } -> std::same_as<bool>;
};

} // namespace allotheque
