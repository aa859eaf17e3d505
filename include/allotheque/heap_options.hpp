// How a heap talks to its source: the span it carves per refill (the paper: one
// page), the size from which requests bypass the partition and go to the
// source, and how much it asks the source for at once (growing with the heap,
// so a small heap stays small and a large one makes few system calls).
#pragma once
#include <concepts>
#include <cstddef>

#include <allotheque/detail/bits.hpp>

namespace allotheque {

template <std::size_t RefillSpan = detail::page_size, std::size_t LargeThreshold = 64 * 1024,
          std::size_t MinGrowth = 64 * 1024, std::size_t MaxGrowth = 4 * 1024 * 1024>
struct heap_options {
    static_assert(RefillSpan >= 64 && detail::is_pow2(RefillSpan), "heap_options: RefillSpan a power of two >= 64");
    static_assert(LargeThreshold >= RefillSpan, "heap_options: LargeThreshold below RefillSpan");
    static_assert(MinGrowth % detail::page_size == 0 && MaxGrowth >= MinGrowth,
                  "heap_options: growth a multiple of the page size, Max >= Min");
    static constexpr std::size_t refill_span = RefillSpan;
    static constexpr std::size_t large_threshold = LargeThreshold;
    static constexpr std::size_t min_growth = MinGrowth;
    static constexpr std::size_t max_growth = MaxGrowth;
};

template <class O>
concept heap_options_like = requires {
    { O::refill_span } -> std::convertible_to<std::size_t>;
    { O::large_threshold } -> std::convertible_to<std::size_t>;
    { O::min_growth } -> std::convertible_to<std::size_t>;
    { O::max_growth } -> std::convertible_to<std::size_t>;
};

} // namespace allotheque
