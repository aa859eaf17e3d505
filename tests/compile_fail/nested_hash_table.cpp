// expect: can only be the outermost level
// A hash table keeps its (mapped) table in its header, so it cannot live in a chunk.
#include <allotheque/allotheque.hpp>

namespace al = allotheque;
using inner = al::hash_table<al::size, al::list<void>, al::match_only, al::pow2_segregation>;
using bad = al::list<al::page, inner, al::match_first>;
bad::header_type* h = nullptr;
