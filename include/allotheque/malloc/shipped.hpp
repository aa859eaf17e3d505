// The malloc declarations the project ships, one library each
// (src/malloc/<name>.cpp, liballotheque_malloc_<name>.so). The profiler's
// replay uses the same types, so its rows are these mallocs' heaps.
#pragma once
#include <allotheque/allocators/kingsley.hpp>
#include <allotheque/allocators/lea.hpp>
#include <allotheque/allocators/medius.hpp>
#include <allotheque/allocators/quickfit.hpp>
#include <allotheque/allocators/segregated.hpp>
#include <allotheque/allocators/velox.hpp>
#include <allotheque/malloc/declaration.hpp>

namespace allotheque::malloc_declarations {

// Exact classes: 16-byte steps to 128 B, then four per power of two. The default.
struct segregated {
    using heap = segregated_heap<arena_source, malloc_options>;
    static constexpr const char* name = "segregated";
};

// QuickFit: exact 16-byte classes to 128 B, powers of two above.
struct quickfit {
    using heap = quickfit_heap<arena_source, malloc_options, 16, 128>;
    static constexpr const char* name = "quickfit";
};

// Kingsley: powers of two.
struct kingsley {
    using heap = kingsley_heap<arena_source, malloc_options>;
    static constexpr const char* name = "kingsley";
};

// What the Velox and Medius libraries' heaps take: malloc_config without a
// record of the previous allocation, which neither passes as its hint
// (heap_config::remember_last; a store less per malloc). Velox too reserves
// 16 KiB spans: its header-only default of one-page spans
// (velox_heap_options) keeps a hinted std::list's nodes on few pages, but a
// malloc passes no hint, and a record per page cost it cache misses
// (threads_bench at one thread, 7 runs: mixed 0.82 -> 0.87x the default
// library's ops/s, local 0.77 -> 0.82; Olden peak memory 1.036 -> 1.014x
// the default library's, time within noise).
inline constexpr heap_config unhinted_malloc_config = [] {
    heap_config c = malloc_config;
    c.remember_last = false;
    return c;
}();

// Neither takes the previous allocation as its hint (malloc_hints_previous):
// its class, under mixed sizes, rarely holds the size asked for, and the
// tables' rule for requests without a hint, the class the size was last
// taken from or freed into, is the per-size reuse a LIFO heap gets (Olden:
// 1.10 -> 1.06x the default library's time for Velox, 1.10 -> 1.05x for
// Medius; threads_bench at one thread 1.13-1.34x faster).
//
// The size in the 64 KiB vicinity it was last taken from or freed into. Each
// vicinity a table of the segregated heap's classes (velox_classed_partition):
// a program's many sizes reuse a few dozen, and a vicinity's chunks of a size
// are one index away (callgrind, random sizes: 421 -> 256 instructions a
// malloc + free against the list of exact sizes, 160 without the previous
// allocation's hint). With the class used last kept per size
// (match_size_last_first), as Medius: the vicinity any size touched last, the
// rule's second try, spared random sizes 5 instructions a step (100.0 ->
// 104.9 without it) but every malloc and free stored it (one size: 65 -> 61
// a malloc + free; Olden and threads_bench times the same within noise).
struct velox {
    using partition = velox_classed_partition<16, 64 * 1024, match_size_last_first>;
    using heap = allotheque::heap<partition, arena_source, configured<unhinted_malloc_config>>;
    static constexpr const char* name = "velox";
    static constexpr bool hint_previous_allocation = false;
};

// The same on page classes, each page's classes in two tagged ways
// (medius_classed_partition), with the class used last kept per size
// (match_size_last_first): a page holds one size, so the page any size
// touched last, the rule's second try, never served (random sizes: none of
// 25,397 searches), and every pop and free stored it.
struct medius {
    using partition = medius_classed_partition<12, 16, 2, 64 * 1024, match_size_last_first>;
    using heap = allotheque::heap<partition, arena_source, configured<unhinted_malloc_config>>;
    static constexpr const char* name = "medius";
    static constexpr bool hint_previous_allocation = false;
};

// Boundary tags, bins, splitting and coalescing, with fast bins (blocks up to
// 1 KiB freed without coalescing until a search needs them): half the
// instructions of immediate coalescing per small malloc + free
// (bench/instructions: 539 -> 262 per pair; 112 since the malloc pops a
// parked block inline, with no frame), the Olden suite's fragmentation
// unchanged (README, "Lea deferred").
//
// Its spans grow by at least 128 KiB, twice the large threshold, as glibc
// pads its heap's top by 128 KiB: at 64 KiB a span could never hold a block
// near the threshold, so a buffer that realloc grew in place to ~64 KiB ran
// out of room at its span's end, and every such growth took a new span and
// copied the block (bench/instructions' realloc cell: 402 -> 265
// instructions a realloc, the copy 134 of them).
inline constexpr heap_config lea_malloc_config = [] {
    heap_config c = malloc_config;
    c.min_growth = 2 * c.large_threshold;
    return c;
}();

struct lea {
    using heap = lea_deferred_heap<arena_source, configured<lea_malloc_config>>;
    static constexpr const char* name = "lea";
};

} // namespace allotheque::malloc_declarations
