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

// Refills of two pages by default. Every span carries a 128-byte record
// (backend/span.hpp): 3.1 % of a 4 KiB span, most of this heap's fragmentation
// on large programs, and 1.6 % of an 8 KiB one. A class is a page whatever the
// span, so a size's chunks in one class still share a page. Velox keeps
// one-page refills: its class is a 64 KiB vicinity, where a size's chunks
// then spread over two pages, and on an aged heap consecutive nodes of a std
// container shared a page half as often (tests/test_hints.cpp).
using medius_heap_options = heap_options<2 * detail::page_size>;

template <source Src = arena_source, heap_options_like Options = medius_heap_options, unsigned S = 12, unsigned K = 16>
using medius_heap = heap<medius_partition<S, K>, Src, Options>;

} // namespace allotheque
