// expect: coalescing takes free neighbours out of the index
// A tree of sizes over list<void> (which cannot take out a given chunk) as the
// index of a coalescing heap: rejected, while the same tree over an element
// list is the best-fit tree of sizes (tests/test_declaring_heaps.cpp).
#include <allotheque/allotheque.hpp>

namespace al = allotheque;
al::block_heap<al::simultaneous<al::adjacency<>, al::rb_tree<al::block_size, al::list<void>, al::best_fit>>> h;
