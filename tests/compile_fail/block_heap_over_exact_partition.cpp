// expect-first: this partition neither splits nor coalesces blocks
// An exact-size partition in block_heap: the first error says to use heap,
// not that manages_blocks is not satisfied (issue 34, item 5).
#include <allotheque/allotheque.hpp>

namespace al = allotheque;
al::block_heap<al::segregated_partition<>> h;
