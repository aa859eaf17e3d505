// Defero with `next`: size first, then location. Sizes are segregated in steps
// of 8 up to 128 with one class above; inside a size class, vicinities
// (4 KiB pages by default) sit in a red-black tree, and each size class caches
// the vicinity it used last, so a run of same-sized allocations skips the tree.
// The overflow class mixes sizes, hence the exact size list under the tree.
//   hash_table<size, multiple_of<8, 128>, match_only> ∘ rb_tree<vicinity, match_next>
//     ∘ list<size, match> ∘ list<void>
#pragma once
#include <cstddef>

#include <allotheque/attributes/address_bits.hpp>
#include <allotheque/attributes/size.hpp>
#include <allotheque/containers/hash_table.hpp>
#include <allotheque/containers/list.hpp>
#include <allotheque/containers/rb_tree.hpp>
#include <allotheque/hashes/multiple_of.hpp>
#include <allotheque/heap.hpp>
#include <allotheque/predicates/match.hpp>

namespace allotheque {

template <unsigned VicinityLog2 = 12, std::size_t Step = 8, std::size_t Max = 128>
using defero_partition =
    hash_table<size, rb_tree<vicinity<VicinityLog2>, list<size, list<void>, match>, match_next>, match_only,
               multiple_of<Step, Max>>;

template <source S = arena_source, heap_options_like Options = heap_options<>, unsigned VicinityLog2 = 12>
using defero_heap = heap<defero_partition<VicinityLog2>, S, Options>;

} // namespace allotheque
