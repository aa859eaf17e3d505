// The interface every benchmark program is written against. A program is a
// function template over a Policy; the driver instantiates it once per
// allocator. Baselines (glibc, jemalloc, mimalloc, tcmalloc through
// LD_PRELOAD of the same binary) ignore hints; allotheque policies honour them.
#pragma once
#include <concepts>
#include <cstddef>

namespace bench {

// A Policy hands out raw memory. `hint` is the address of the object the new
// one will be used with (a tree child's parent, a list element's predecessor);
// it may be nullptr. Deallocation is sized with the size given to allocate.
template <class P>
concept policy = requires(P& p, std::size_t n, const void* hint, void* q) {
    { p.allocate(n, hint) } -> std::same_as<void*>;
    { p.deallocate(q, n) } -> std::same_as<void>;
    { p.name() } -> std::convertible_to<const char*>;
};

} // namespace bench
