// A Lea-style general-purpose allocator, declared: exact bins every 16 bytes
// below 512, four logarithmic bins per power of two above; the first fit in the
// request's bin, else any block of the next non-empty bin (so a block is within
// 25 % of the best fit); splitting and immediate coalescing through the
// adjacency partition; large requests mapped on their own.
//   simultaneous< adjacency<large_enough_to_split>,
//                 hash_table<block_size, lea_bins, first_fit> ∘ list<block_size, first_fit> >
// Why not best_fit inside the bin: a best-fit element list keeps itself sorted,
// and freeing a tree of 2 M nodes (each free merging and re-inserting a growing
// block) then cost 0.96 s against 0.25 s; fragmentation was the same on our tests.
#pragma once
#include <allotheque/block_heap.hpp>
#include <allotheque/containers/adjacency.hpp>
#include <allotheque/containers/element_list.hpp>
#include <allotheque/containers/hash_table.hpp>
#include <allotheque/containers/simultaneous.hpp>
#include <allotheque/hashes/lea_bins.hpp>
#include <allotheque/predicates/fits.hpp>

namespace allotheque {

using lea_partition =
    simultaneous<adjacency<>, hash_table<block_size, list<block_size, void, first_fit, doubly_linked>, first_fit,
                                         lea_bins<16, 512>>>;

template <source S = arena_source, heap_options_like Options = heap_options<>>
using lea_heap = block_heap<lea_partition, S, Options>;

// The same with deferred coalescing of blocks up to 256 bytes (Lea's fast bins).
using lea_deferred_partition =
    simultaneous<adjacency<large_enough_to_split<>, deferred_coalescing<>>,
                 hash_table<block_size, list<block_size, void, first_fit, doubly_linked>, first_fit, lea_bins<16, 512>>>;

template <source S = arena_source, heap_options_like Options = heap_options<>>
using lea_deferred_heap = block_heap<lea_deferred_partition, S, Options>;

} // namespace allotheque
