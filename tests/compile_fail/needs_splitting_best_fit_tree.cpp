// expect: no level of this partition finds chunks of exactly the requested size
// best_fit in a tree of sizes: same problem as first_fit.
#include <allotheque/allotheque.hpp>

namespace al = allotheque;
al::heap<al::rb_tree<al::size, al::list<void>, al::best_fit>, al::mmap_source> h;
