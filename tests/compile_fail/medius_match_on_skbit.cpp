// expect: fresh memory from the system almost never lands in the hint's class
// Medius with a pure match on its SK-bit level.
#include <allotheque/allotheque.hpp>

namespace al = allotheque;
using bad = al::hash_table<al::skbit<12, 16>, al::list<al::size, al::list<void>, al::match>, al::match, al::dense_identity>;
al::heap<bad, al::mmap_source> h;
