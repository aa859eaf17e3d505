// QuickFit (Weinstock): Kingsley with exact classes for small sizes. The two
// lines that differ from Kingsley are the hash (steps of `Step` up to `Max`,
// powers of two above, so every class still holds one size) and nothing else.
//   hash_table<size, multiple_then_pow2<8, 128>, match_only> ∘ list<void>
#pragma once
#include <cstddef>

#include <allotheque/attributes/size.hpp>
#include <allotheque/containers/hash_table.hpp>
#include <allotheque/containers/list.hpp>
#include <allotheque/hashes/multiple_of.hpp>
#include <allotheque/heap.hpp>
#include <allotheque/predicates/match.hpp>

namespace allotheque {

template <std::size_t Step = 8, std::size_t Max = 128>
using quickfit_partition = hash_table<size, list<void>, match_only, multiple_then_pow2<Step, Max>>;

template <source S = arena_source, heap_options_like Options = heap_options<>, std::size_t Step = 8,
          std::size_t Max = 128>
using quickfit_heap = heap<quickfit_partition<Step, Max>, S, Options>;

} // namespace allotheque
