// expect: Fallback is not a fallback_to enumerator
// fallback_to(4) is a valid constant of the enum but names no fallback: it
// used to compile and behave as one of the others.
#include <allotheque/allotheque.hpp>

namespace al = allotheque;

using bad = al::predicate_of<al::start_at::lookup, al::stop_when::equal, al::fallback_to(4)>;
al::heap<al::hash_table<al::size, al::list<void>, bad, al::pow2_segregation>> h;
