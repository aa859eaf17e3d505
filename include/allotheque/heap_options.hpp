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
          std::size_t MinGrowth = 64 * 1024, std::size_t MaxGrowth = 4 * 1024 * 1024, bool PageSpans = false>
struct heap_options {
    static_assert(RefillSpan >= 64 && detail::is_pow2(RefillSpan), "heap_options: RefillSpan a power of two >= 64");
    static_assert(LargeThreshold >= RefillSpan, "heap_options: LargeThreshold below RefillSpan");
    static_assert(MinGrowth % detail::page_size == 0 && MaxGrowth >= MinGrowth,
                  "heap_options: growth a multiple of the page size, Max >= Min");
    static constexpr std::size_t refill_span = RefillSpan;
    static constexpr std::size_t large_threshold = LargeThreshold;
    static constexpr std::size_t min_growth = MinGrowth;
    static constexpr std::size_t max_growth = MaxGrowth;
    // PageSpans: every refill span is whole pages, page-aligned, and cut into
    // chunks of one size only (no leftover tail of another size is kept), so a
    // page belongs to exactly one chunk size (what layers::page_map relies on).
    static constexpr bool page_spans = PageSpans;
};

// Options without the page_spans member count as false.
template <class O>
inline constexpr bool page_spans_of = false;
template <class O>
    requires requires { O::page_spans; }
inline constexpr bool page_spans_of<O> = O::page_spans;

template <class O>
concept heap_options_like = requires {
    { O::refill_span } -> std::convertible_to<std::size_t>;
    { O::large_threshold } -> std::convertible_to<std::size_t>;
    { O::min_growth } -> std::convertible_to<std::size_t>;
    { O::max_growth } -> std::convertible_to<std::size_t>;
};

} // namespace allotheque
