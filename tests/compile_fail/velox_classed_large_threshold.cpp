// expect: the partition has no class for chunks up to the heap's large_threshold
// Velox over size classes bounded at 64 KiB, under a heap whose large
// threshold sends 256 KiB chunks to the partition: the class index of such a
// chunk would fall past each vicinity's table.
#include <allotheque/allotheque.hpp>

namespace al = allotheque;
using options = al::configured<al::heap_config{.large_threshold = 256 * 1024}>;
al::heap<al::velox_classed_partition<>, al::arena_source, options> h;
