// Kingsley with coalescing (Heap Layers' experiment): power-of-two classes as in
// Kingsley, but a class holds any free block in [2^k, 2^(k+1)), a bigger block
// is split, and freed blocks merge with free neighbours.
//   simultaneous< adjacency<large_enough_to_split>,
//                 hash_table<block_size, pow2_bins, first_fit> ∘ list<block_size, any> >
#pragma once
#include <allotheque/block_heap.hpp>
#include <allotheque/containers/adjacency.hpp>
#include <allotheque/containers/element_list.hpp>
#include <allotheque/containers/hash_table.hpp>
#include <allotheque/containers/simultaneous.hpp>
#include <allotheque/hashes/pow2_segregation.hpp>
#include <allotheque/predicates/fits.hpp>

namespace allotheque {

using kingsley_coalescing_partition =
    simultaneous<adjacency<>, hash_table<block_size, list<block_size, void, any, doubly_linked>, first_fit, pow2_bins>>;

template <source S = arena_source, heap_options_like Options = heap_options<>>
using kingsley_coalescing_heap = block_heap<kingsley_coalescing_partition, S, Options>;

} // namespace allotheque
