// Everything public: attributes, predicates, containers, hashes, sources, the
// heaps, the allocators, the std/pmr adapters, hints and the hinted
// containers, the back end, the layers and the trace format. None needs a
// library beyond the C++ standard library and Boost's headers (the mutexes of
// layers/ and sources/arena_source need no extra link flag with glibc >= 2.34).
// The ctest `header_check` compiles every header on its own, and
// `umbrella_complete` checks that this file names every header outside detail/.
#pragma once
#include <allotheque/version.hpp>
#include <allotheque/request.hpp>
#include <allotheque/attributes/attribute.hpp>
#include <allotheque/attributes/size.hpp>
#include <allotheque/attributes/address_bits.hpp>
#include <allotheque/predicates/predicate.hpp>
#include <allotheque/predicates/fits.hpp>
#include <allotheque/predicates/match.hpp>
#include <allotheque/predicates/nearest.hpp>
#include <allotheque/containers/search.hpp>
#include <allotheque/containers/partition.hpp>
#include <allotheque/containers/links.hpp>
#include <allotheque/containers/list_fwd.hpp>
#include <allotheque/containers/list.hpp>
#include <allotheque/containers/element_list.hpp>
#include <allotheque/containers/class_node.hpp>
#include <allotheque/containers/class_index.hpp>
#include <allotheque/containers/walk_memo.hpp>
#include <allotheque/containers/rb_tree.hpp>
#include <allotheque/containers/hash_table.hpp>
#include <allotheque/containers/adjacency.hpp>
#include <allotheque/containers/simultaneous.hpp>
#include <allotheque/hashes/hash_function.hpp>
#include <allotheque/hashes/pow2_segregation.hpp>
#include <allotheque/hashes/multiple_of.hpp>
#include <allotheque/hashes/lea_bins.hpp>
#include <allotheque/hashes/identity.hpp>
#include <allotheque/sources/source.hpp>
#include <allotheque/sources/malloc_source.hpp>
#include <allotheque/sources/mmap_source.hpp>
#include <allotheque/sources/sbrk_source.hpp>
#include <allotheque/sources/counting_source.hpp>
#include <allotheque/sources/arena_source.hpp>
#include <allotheque/backend/span.hpp>
#include <allotheque/backend/page_map.hpp>
#include <allotheque/backend/range_set.hpp>
#include <allotheque/backend/record_pool.hpp>
#include <allotheque/backend/span_pool.hpp>
#include <allotheque/backend/span_registry.hpp>
#include <allotheque/heap_options.hpp>
#include <allotheque/heap.hpp>
#include <allotheque/block_heap.hpp>
#include <allotheque/allocators/kingsley.hpp>
#include <allotheque/allocators/quickfit.hpp>
#include <allotheque/allocators/velox.hpp>
#include <allotheque/allocators/medius.hpp>
#include <allotheque/allocators/defero.hpp>
#include <allotheque/allocators/lea.hpp>
#include <allotheque/allocators/kingsley_coalescing.hpp>
#include <allotheque/allocator.hpp>
#include <allotheque/memory_resource.hpp>
#include <allotheque/hint_policy.hpp>
#include <allotheque/scoped_hint.hpp>
#include <allotheque/stl/hinted_tree.hpp>
#include <allotheque/stl/hinted_list.hpp>
#include <allotheque/stl/hinted_set.hpp>
#include <allotheque/stl/hinted_map.hpp>
#include <allotheque/layers/heap_concept.hpp>
#include <allotheque/layers/layer.hpp>
#include <allotheque/layers/checked.hpp>
#include <allotheque/layers/locked.hpp>
#include <allotheque/layers/page_map.hpp>
#include <allotheque/layers/per_thread.hpp>
#include <allotheque/layers/sized.hpp>
#include <allotheque/layers/stats.hpp>
#include <allotheque/trace/format.hpp>
#include <allotheque/trace/builder.hpp>
#include <allotheque/trace/objects.hpp>
#include <allotheque/trace/reader.hpp>
