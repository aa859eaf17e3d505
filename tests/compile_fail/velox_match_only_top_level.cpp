// expect: fresh memory from the system almost never lands in the hint's class
// match_only on an address level has no fallback either.
#include <allotheque/allotheque.hpp>

namespace al = allotheque;
using bad = al::hash_table<al::vicinity<16>, al::list<al::size, al::list<void>, al::match>, al::match_only,
                           al::sparse_identity>;
al::heap<bad> h;
