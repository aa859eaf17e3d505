// expect: no level of this partition finds chunks of exactly the requested size
// Defero without the exact size list under its tree: multiple_of's overflow
// class mixes sizes, so nothing guarantees an exact chunk.
#include <allotheque/allotheque.hpp>

namespace al = allotheque;
using bad = al::hash_table<al::size, al::rb_tree<al::vicinity<12>, al::list<void>, al::match_next>, al::match_only,
                           al::multiple_of<8, 128>>;
al::heap<bad> h;
