// How a heap talks to its back end: the span it carves per refill (the paper:
// one page), the size from which a request is one block of its own, how much it
// asks the source for at once (growing with the heap, so a small heap stays
// small and a large one makes few system calls), and when memory goes back.
//
// Two spellings of the same thing:
//   heap_options<RefillSpan, LargeThreshold, MinGrowth, MaxGrowth>   (positional)
//   configured<heap_config{.large_threshold = 1 << 20, .reclaim = reclaim_policy::never}>
// The second names any subset of the fields below and keeps the defaults for
// the rest.
#pragma once
#include <concepts>
#include <cstddef>

#include <allotheque/detail/bits.hpp>

namespace allotheque {

// When an exact-size heap gives fully free spans back while it runs (see
// heap.hpp, "Giving memory back"):
//   never      only trim(), deallocate_all() and destruction (and a sweep before
//              an allocation would fail);
//   threshold  also a sweep from a refill, at most once per reclaim interval:
//              the default, with nothing added to the allocate and free paths;
//   eager      also counts live bytes (a few ns per call) and sweeps as soon as
//              they fall below half the small spans, releasing every span when
//              nothing is live (at most once per reclaim interval).
enum class reclaim_policy { never, threshold, eager };

struct heap_config {
    std::size_t refill_span = detail::page_size;   // smallest span cut into chunks of one size
    std::size_t large_threshold = 64 * 1024;       // larger requests are blocks of their own
    std::size_t min_growth = 64 * 1024;            // asked of the source at least ...
    std::size_t max_growth = 4 * 1024 * 1024;      // ... and at most per growth (larger blocks: their size)
    reclaim_policy reclaim = reclaim_policy::threshold;
    // At most one automatic reclaim per this many milliseconds (and none in a
    // heap's first interval): a heap that empties and fills again in cycles
    // keeps its spans instead of giving them back and carving them again.
    unsigned reclaim_interval_ms = 1000;
    // Free pages the back end keeps ready for reuse (the large-block cache),
    // max(retain_bytes, peak / 8), the peak of bytes in use over the last ten
    // to twenty purge delays; beyond it, free pages go back to the
    // system: whole source allocations are returned, the rest decommitted (madvise).
    std::size_t retain_bytes = 4 * 1024 * 1024;
    // Free pages beyond that budget go back once they have stayed free this
    // long (so memory freed and taken again at once is never given back and
    // faulted in again), or at once when they pass four times the budget.
    unsigned purge_delay_ms = 1000;
    // Chunk sizes are multiples of this (8, or 16 for malloc's alignment).
    std::size_t granularity = 8;
    // Exact-size heaps: mark freed chunks so that a second free aborts with a
    // message (detail/free_marks.hpp); costs a store per allocation and a load
    // and a store per free, and the mark's word past the partition's links:
    // the smallest chunk grows by 8 bytes where the links fill it (heap's
    // min_chunk). Off by default (layers::checked is the full checker); the
    // malloc replacement turns it on.
    bool free_marks = false;
    // Exact-size heaps, chunks below a page: a span is reserved for one size
    // at this length (at least refill_span) and handed to the partition
    // refill_span at a time; pages not handed out yet are never written. The
    // back end's record per span is then paid per reservation.
    std::size_t span_reserve = 16 * 1024;
    // Heaps that read addresses: each allocation is recorded for
    // last_allocation(), the "near the previous allocation" hint of the
    // hint policies and layers, at a store per allocation. Off, it stays
    // nullptr, as in a heap that places nothing (what a malloc that passes
    // no hint uses: it reads it nowhere).
    bool remember_last = true;
};

template <heap_config C = heap_config{}>
struct configured {
    static_assert(C.refill_span >= 64 && detail::is_pow2(C.refill_span), "heap_config: refill_span a power of two >= 64");
    static_assert(C.large_threshold >= C.refill_span, "heap_config: large_threshold below refill_span");
    static_assert(C.min_growth % detail::page_size == 0 && C.max_growth >= C.min_growth,
                  "heap_config: growth a multiple of the page size, max_growth >= min_growth");
    static_assert(C.granularity >= 8 && detail::is_pow2(C.granularity) && C.granularity <= C.refill_span,
                  "heap_config: granularity a power of two >= 8");
    static_assert(C.span_reserve % detail::page_size == 0, "heap_config: span_reserve a multiple of the page size");
    static constexpr heap_config config = C;
    static constexpr std::size_t refill_span = C.refill_span;
    static constexpr std::size_t large_threshold = C.large_threshold;
    static constexpr std::size_t min_growth = C.min_growth;
    static constexpr std::size_t max_growth = C.max_growth;
};

// The positional form.
template <std::size_t RefillSpan = detail::page_size, std::size_t LargeThreshold = 64 * 1024,
          std::size_t MinGrowth = 64 * 1024, std::size_t MaxGrowth = 4 * 1024 * 1024>
struct heap_options : configured<heap_config{RefillSpan, LargeThreshold, MinGrowth, MaxGrowth}> {};

template <class O>
concept heap_options_like = requires {
    { O::refill_span } -> std::convertible_to<std::size_t>;
    { O::large_threshold } -> std::convertible_to<std::size_t>;
    { O::min_growth } -> std::convertible_to<std::size_t>;
    { O::max_growth } -> std::convertible_to<std::size_t>;
};

// The full configuration of any options type: user types that name only the
// four sizes get the defaults for the rest.
template <heap_options_like O>
constexpr heap_config config_of() noexcept {
    if constexpr (requires { O::config; }) {
        return O::config;
    } else {
        heap_config c;
        c.refill_span = O::refill_span;
        c.large_threshold = O::large_threshold;
        c.min_growth = O::min_growth;
        c.max_growth = O::max_growth;
        return c;
    }
}

} // namespace allotheque
