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
#include <allotheque/hashes/identity.hpp>
#include <allotheque/heap.hpp>
#include <allotheque/predicates/match.hpp>

namespace allotheque {

template <unsigned S = 12, unsigned K = 16>
using medius_partition = hash_table<skbit<S, K>, list<size, list<void>, match>, match_last_first, dense_identity>;

// Medius' default options: the library's, one page per refill. They once
// refilled two pages, to halve the share of each span's 128-byte record;
// spans of small chunks are now 16 KiB reservations handed out a page at a
// time (heap_config::span_reserve), which costs the record 0.8 % for every
// heap, and one-page refills measured the same in the Olden suite (time
// 1.01x, memory 1.00x, fragmentation mean 3.07 % against 3.22 %). The name
// stays for code that spells it.
using medius_heap_options = heap_options<detail::page_size>;

template <source Src = arena_source, heap_options_like Options = medius_heap_options, unsigned S = 12, unsigned K = 16>
using medius_heap = heap<medius_partition<S, K>, Src, Options>;

} // namespace allotheque
