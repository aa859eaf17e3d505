// expect: Start is not a start_at enumerator
// An out-of-range start position.
#include <allotheque/allotheque.hpp>

namespace al = allotheque;

using bad = al::predicate_of<al::start_at(7), al::stop_when::greater_equal>;
al::list<al::size, al::list<void>, bad>::header_type h;
