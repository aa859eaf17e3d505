// expect: Stop is not a stop_when enumerator
// An out-of-range termination.
#include <allotheque/allotheque.hpp>

namespace al = allotheque;

using bad = al::predicate_of<al::start_at::begin, al::stop_when(9)>;
al::rb_tree<al::size, al::list<void>, bad>::header_type h;
