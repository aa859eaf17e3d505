// expect-first: this partition splits and coalesces blocks
// Lea's partition in the exact-size heap: the first error says to use
// block_heap, not that the partition lacks min_chunk (issue 34, item 5).
#include <allotheque/allotheque.hpp>

namespace al = allotheque;
al::heap<al::lea_partition_of<>> h;
