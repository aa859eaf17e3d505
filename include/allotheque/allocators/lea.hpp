// A Lea-style general-purpose allocator, declared: exact bins every 16 bytes
// below 512, four logarithmic bins per power of two above; a bounded first fit
// in the request's bin, else any block of the next non-empty bin; splitting and
// immediate coalescing through the adjacency partition; large requests mapped
// on their own.
//   simultaneous< adjacency<large_enough_to_split>,
//                 hash_table<block_size, lea_bins, first_fit> ∘
//                 list<block_size, bounded<first_fit, 16>> >
// Why not best_fit inside the bin: a best-fit element list keeps itself sorted,
// and freeing a tree of 2 M nodes (each free merging and re-inserting a growing
// block) then cost 0.96 s against 0.25 s; fragmentation was the same on our tests.
//
// Why bounded (issue 16): the bins below 512 bytes hold one size each, so their
// first block always fits; a bin above holds sizes up to 25 % apart, and an
// unbounded first fit walked every block in it that was too small for the
// request, on every malloc: 2.4 ms per malloc with 100,000 free 1,040-byte
// blocks ahead of a 1,200-byte request. The search now looks at no more than
// lea_bin_walk blocks of the request's own bin before it takes the first block
// of the next non-empty bin (every block there fits), so a malloc costs at most
// lea_bin_walk + 1 list steps plus one bitmap search, whatever the bin holds. What
// it gives up: a block of the request's bin that would fit but lies deeper than
// lea_bin_walk is not used for this request (it stays free for the next one
// that reaches it, for any smaller request, and for merges).
// (Lea's own allocator finds the best fit in a bin in O(log n) with sorted
// bins, tries in dlmalloc 2.8; coalescing needs the index to remove any block,
// and rb_tree cannot yet, so a tree per bin is left for later.)
#pragma once
#include <allotheque/block_heap.hpp>
#include <allotheque/containers/adjacency.hpp>
#include <allotheque/containers/element_list.hpp>
#include <allotheque/containers/hash_table.hpp>
#include <allotheque/containers/simultaneous.hpp>
#include <allotheque/hashes/lea_bins.hpp>
#include <allotheque/predicates/bounded.hpp>
#include <allotheque/predicates/fits.hpp>

namespace allotheque {

// Blocks of the request's own bin a malloc looks at (see above). 4, 16 and 64
// held the same memory as no bound on bench/micro/malloc_layers BM_batch
// (10^4 random sizes up to 128 B, 1 KiB, 8 KiB: bytes from the source per
// live byte 1.32, 1.10, 1.17) and on test_block_heap's model (peak 8,320 KiB);
// the exact bins below 512 bytes never walk, so 16 costs nothing there.
// docs/bad_input.md states the guarantee.
inline constexpr std::size_t lea_bin_walk = 16;
using lea_bin_fit = bounded<first_fit, lea_bin_walk>;

// The declaration, with the search inside a bin and the adjacency partition as
// parameters (the tests count the bin walk through BinFit).
template <class BinFit = lea_bin_fit, class Adjacency = adjacency<>>
using lea_partition_of = simultaneous<
    Adjacency, hash_table<block_size, list<block_size, void, BinFit, doubly_linked>, first_fit, lea_bins<16, 512>>>;

using lea_partition = lea_partition_of<>;

template <source S = arena_source, heap_options_like Options = heap_options<>>
using lea_heap = block_heap<lea_partition, S, Options>;

// The same with deferred coalescing (Lea's fast bins): freed blocks up to
// 1 KiB wait on per-size lists, at most 256 of them, before they merge.
// Why 1 KiB and not 256 B (as up to 2026-12-03): random 8-1024 B requests
// then find a parked block of their size far more often (the Lea library's
// random cell 354 -> 219 instructions a step; glibc's tcache parks up to
// 1,032 B for the same reason), while the Olden programs' peak memory stayed
// the same to 0.1 MB and python, perl, sqlite and g++ within 2 % (the 256
// parked blocks are at most 256 KiB, merged before the heap grows).
using lea_deferred_partition =
    lea_partition_of<lea_bin_fit, adjacency<large_enough_to_split<>, deferred_coalescing<256, 1024>>>;

template <source S = arena_source, heap_options_like Options = heap_options<>>
using lea_deferred_heap = block_heap<lea_deferred_partition, S, Options>;

} // namespace allotheque
