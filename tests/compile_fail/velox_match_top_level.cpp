// expect: fresh memory from the system almost never lands in the hint's class
// Velox with `match` on the vicinity level: the paper's (match, match) loops
// forever, since refilled memory never lands in the hint's class.
#include <allotheque/allotheque.hpp>

namespace al = allotheque;
using bad = al::hash_table<al::vicinity<16>, al::list<al::size, al::list<void>, al::match>, al::match, al::sparse_identity>;
al::heap<bad> h;
