// Velox: location first. Free chunks are split into vicinities (K-classes of
// 2^VicinityLog2 bytes; the paper's K = 16 on 32 bits gives 64 KiB), each into
// exact sizes. A request takes the exact size from the hint's vicinity, else
// from the vicinity used last, by an allocation or a free (temporal locality: a
// chunk freed a moment ago is still in cache), else from the lowest-address
// vicinity that has it (wilderness preservation).
//   hash_table<vicinity, sparse identity, match_last_first> ∘ list<size, match> ∘ list<void>
// 2^(47 - VicinityLog2) classes on 47-bit addresses call for the sparse index.
#pragma once
#include <cstddef>

#include <allotheque/attributes/address_bits.hpp>
#include <allotheque/attributes/size.hpp>
#include <allotheque/containers/hash_table.hpp>
#include <allotheque/containers/list.hpp>
#include <allotheque/hashes/identity.hpp>
#include <allotheque/hashes/spaced_classes.hpp>
#include <allotheque/heap.hpp>
#include <allotheque/predicates/match.hpp>

namespace allotheque {

template <unsigned VicinityLog2 = 16, class TopPredicate = match_last_first>
using velox_partition =
    hash_table<vicinity<VicinityLog2>, list<size, list<void>, match>, TopPredicate, sparse_identity>;

// Velox over the segregated heap's size classes instead of exact sizes: each
// vicinity a table of those classes, so that a vicinity's chunks of a size
// are one index away instead of a walk along its sizes. What the Velox malloc
// library uses, whose requests are rounded to those classes anyway.
//   hash_table<vicinity, sparse identity, match_last_first> ∘ segregated_partition (to 64 KiB)
// The classes stop at 64 KiB, a heap's default large threshold (a heap with a
// higher one is refused at compile time), so a vicinity's table is 45 stack
// heads: 0.6 % of the vicinity, where all 237 classes cost 2.9 % of the
// Olden programs' peak memory. The Velox library takes TopPredicate =
// match_size_last_first (malloc/shipped.hpp).
template <unsigned VicinityLog2 = 16, std::size_t MaxSize = 64 * 1024, class TopPredicate = match_last_first>
using velox_classed_partition =
    hash_table<vicinity<VicinityLog2>, hash_table<size, list<void>, match_only, spaced_classes<16, 128, 4, MaxSize>>,
               TopPredicate, sparse_identity>;

// Velox' default options: every span one page, no reservation
// (heap_config::span_reserve = a page). A vicinity is 16 pages; with 16 KiB
// reservations a size's free chunks in a vicinity spread over four pages, and
// on an aged heap consecutive nodes of a std::list shared a page 0.35 of the
// time instead of 0.99 (tests/test_hints.cpp). The price is the span record:
// 3.1 % of each page, where the other heaps pay 0.8 %.
using velox_heap_options = configured<heap_config{.span_reserve = detail::page_size}>;

template <source S = arena_source, heap_options_like Options = velox_heap_options, unsigned VicinityLog2 = 16>
using velox_heap = heap<velox_partition<VicinityLog2>, S, Options>;

} // namespace allotheque
