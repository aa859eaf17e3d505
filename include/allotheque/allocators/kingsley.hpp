// Kingsley (BSD 4.2): power-of-two size classes, each a list of chunks; a
// request is rounded up to its class and served from that class only; a refill
// cuts one page into chunks of the class. No splitting, no coalescing.
//   hash_table<size, pow2 segregation, match_only> ∘ list<void>
#pragma once
#include <allotheque/attributes/size.hpp>
#include <allotheque/containers/hash_table.hpp>
#include <allotheque/containers/list.hpp>
#include <allotheque/hashes/pow2_segregation.hpp>
#include <allotheque/heap.hpp>
#include <allotheque/predicates/match.hpp>

namespace allotheque {

using kingsley_partition = hash_table<size, list<void>, match_only, pow2_segregation>;

template <source S = arena_source, heap_options_like Options = heap_options<>>
using kingsley_heap = heap<kingsley_partition, S, Options>;

} // namespace allotheque
