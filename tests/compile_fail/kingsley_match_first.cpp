// expect: no level of this partition finds chunks of exactly the requested size
// Kingsley's bins with a fallback predicate would hand out chunks of another class.
#include <allotheque/allotheque.hpp>

namespace al = allotheque;
al::heap<al::hash_table<al::size, al::list<void>, al::match_first, al::pow2_segregation>> h;
