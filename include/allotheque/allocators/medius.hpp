// Medius: Velox on bits [S, S+K) instead of the high bits. The table is dense
// (2^K classes) and classes alias every 2^(S+K) bytes: two chunks of one class
// are either within 2^S bytes of each other or at least 2^(S+K) apart. Defaults
// S = 12, K = 16: each class is one 4 KiB page, aliasing every 256 MiB.
//   hash_table<skbit<S, K>, identity, match_last_first> ∘ list<size, match> ∘ list<void>
#pragma once
#include <allotheque/attributes/address_bits.hpp>
#include <allotheque/attributes/size.hpp>
#include <allotheque/containers/hash_table.hpp>
#include <allotheque/containers/list.hpp>
#include <allotheque/containers/size_ways.hpp>
#include <allotheque/hashes/identity.hpp>
#include <allotheque/hashes/spaced_classes.hpp>
#include <allotheque/heap.hpp>
#include <allotheque/predicates/match.hpp>

namespace allotheque {

template <unsigned S = 12, unsigned K = 16>
using medius_partition = hash_table<skbit<S, K>, list<size, list<void>, match>, match_last_first, dense_identity>;

// Medius over the segregated heap's size classes (to 64 KiB), each page's
// sizes in two tagged ways (size_ways): a page's chunks of a size one
// compare away instead of a walk along its sizes. What the Medius malloc
// library uses, whose requests are rounded to those classes anyway. A direct
// table of the 45 classes per page, as Velox' vicinities have, cost 9.5 % of
// the Olden programs' peak memory; two ways cost 32 bytes a page.
// The Medius library takes TopPredicate = match_size_last_first: its pages
// hold one size each, so the page any size touched last never had the size
// asked for.
template <unsigned S = 12, unsigned K = 16, unsigned Ways = 2, std::size_t MaxSize = 64 * 1024,
          class TopPredicate = match_last_first>
using medius_classed_partition = hash_table<skbit<S, K>, size_ways<spaced_classes<16, 128, 4, MaxSize>, Ways>,
                                            TopPredicate, dense_identity>;

// Refills of two pages by default, from the heap's 16 KiB reservations
// (heap_config::span_reserve), so the span record costs 0.8 % as for the
// other heaps. Two pages rather than one: they were chosen when each refill
// was a span of its own (the record then cost 1.6 % instead of 3.1 %), and
// with reservations one-page refills measured slower on em3d, whose nodes
// are 500-1100 bytes (minimum of five runs 0.76 s against 0.57 s). A class
// is a page whatever the refill, so a size's chunks in one class still
// share a page.
using medius_heap_options = heap_options<2 * detail::page_size>;

template <source Src = arena_source, heap_options_like Options = medius_heap_options, unsigned S = 12, unsigned K = 16>
using medius_heap = heap<medius_partition<S, K>, Src, Options>;

} // namespace allotheque
