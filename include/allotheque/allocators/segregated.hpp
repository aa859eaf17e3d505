// Segregated exact classes: QuickFit's shape (one exact class per size, looked
// up directly, a span per refill cut into chunks of the class) with the size
// spacing of today's general-purpose mallocs — 16-byte steps to 128, then four
// sizes per power of two — so that every size up to the large threshold has a
// class that wastes at most a quarter of a block. The exact-size heap of the
// malloc replacement.
//   hash_table<size, spaced_classes<16, 128, 4>, match_only> ∘ list<void>
#pragma once
#include <cstddef>

#include <allotheque/attributes/size.hpp>
#include <allotheque/containers/hash_table.hpp>
#include <allotheque/containers/list.hpp>
#include <allotheque/hashes/spaced_classes.hpp>
#include <allotheque/heap.hpp>
#include <allotheque/predicates/match.hpp>

namespace allotheque {

template <std::size_t Step = 16, std::size_t Linear = 128, std::size_t PerDoubling = 4>
using segregated_partition = hash_table<size, list<void>, match_only, spaced_classes<Step, Linear, PerDoubling>>;

template <source S = arena_source, heap_options_like Options = heap_options<>>
using segregated_heap = heap<segregated_partition<>, S, Options>;

} // namespace allotheque
