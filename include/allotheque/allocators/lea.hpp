// A Lea-style general-purpose allocator, declared: exact bins every 16 bytes
// below 512, four logarithmic bins per power of two above, best fit inside a
// bin, first non-empty larger bin otherwise; splitting and immediate coalescing
// through the adjacency partition; large requests mapped on their own.
//   simultaneous< adjacency<large_enough_to_split>,
//                 hash_table<block_size, lea_bins, first_fit> ∘ list<block_size, best_fit> >
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
    simultaneous<adjacency<>, hash_table<block_size, list<block_size, void, best_fit, doubly_linked>, first_fit,
                                         lea_bins<16, 512>>>;

template <source S = sbrk_source, heap_options_like Options = heap_options<>>
using lea_heap = block_heap<lea_partition, S, Options>;

} // namespace allotheque
