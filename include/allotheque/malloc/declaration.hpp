// A malloc declaration: the heap every thread gets, the name the library
// reports, and optionally how a request's size is rounded before the heap
// sees it.
//
//   struct my_malloc {
//       using heap = allotheque::segregated_heap<allotheque::arena_source, allotheque::malloc_options>;
//       static constexpr const char* name = "mine";
//       // optional: static constexpr std::size_t request_size(std::size_t n) noexcept;
//       // optional: static constexpr bool count_remote_frees = true;
//       // optional: static constexpr bool hint_previous_allocation = false;
//   };
//   ALLOTHEQUE_DEFINE_MALLOC(my_malloc);   // allotheque/malloc.hpp
#pragma once
#include <concepts>
#include <cstddef>

#include <allotheque/allocators/segregated.hpp>
#include <allotheque/malloc/malloc_heap.hpp>

namespace allotheque {

// The shape alone (a heap type and a name), for the first of
// ALLOTHEQUE_DEFINE_MALLOC's messages.
template <class D>
concept malloc_declaration_shape = requires {
    typename D::heap;
    { D::name } -> std::convertible_to<const char*>;
};

template <class D>
concept malloc_declaration = malloc_declaration_shape<D> && malloc_heap<typename D::heap>;

// Whether each thread heap counts the frees other threads hand it
// (`remote.pushed()` of each heap malloc_runtime<D>::for_each_heap visits):
// off unless the declaration asks, since the count is a second atomic
// increment on the owner's remote list, beside its compare-and-swap, on every
// cross-thread free.
template <class D>
inline constexpr bool malloc_counts_remote_frees = requires { requires D::count_remote_frees; };

// Whether a locality-aware heap gets the thread's previous allocation as the
// hint of each malloc (the default) or no hint (`hint_previous_allocation =
// false`), which leaves the place to its partition's rule for requests
// without one. The Velox and Medius libraries take none: their tables of
// size classes then target the class the size was last taken from or freed
// into (size_fronts), where the previous allocation's class, of another size,
// rarely held the size.
template <class D>
inline constexpr bool malloc_hints_previous = !requires { requires !D::hint_previous_allocation; };

// The size the heap is asked for: D::request_size(n) where the declaration has
// one, n otherwise.
template <class D>
[[gnu::always_inline]] constexpr std::size_t malloc_request_size(std::size_t n) noexcept {
    if constexpr (requires { D::request_size(n); })
        return D::request_size(n);
    else
        return n;
}

// For heaps that keep every size exact (Velox, Medius): a program asking for
// thousands of distinct sizes (any 16-byte step up to 64 KiB) would carve a
// new chunk for almost every request and never reuse a freed one for a
// neighbouring size. Rounded to the segregated heap's classes (at most a
// quarter of the block lost above 128 B), they are a few dozen sizes, each
// reused by every request that rounds to it. Large blocks stay exact.
// A declaration's base: `struct d : segregated_rounding<H> { name }` is heap
// H with that rounding.
template <class Heap>
struct segregated_rounding {
    using heap = Heap;
    // Forced inline, with the rounding it calls: it is every malloc's first
    // step, and g++ left each of them out of line in turn as the libraries grew.
    [[gnu::always_inline]] static constexpr std::size_t request_size(std::size_t n) noexcept {
        return n <= Heap::options::large_threshold ? segregated_partition<>::round_size(n) : n;
    }
};

} // namespace allotheque
