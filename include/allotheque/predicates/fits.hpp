// The sequential-fit predicates (Wilson's names). On a size partition they can
// return a larger chunk than asked for, so a heap accepts them on size only
// together with splitting; on any other attribute they are plain search orders.
#pragma once
#include <allotheque/predicates/predicate.hpp>

namespace allotheque {

struct any : predicate_of<start_at::begin, stop_when::always> {};               // the first class
struct first_fit : predicate_of<start_at::begin, stop_when::greater_equal> {}; // first class >= target
struct next_fit : predicate_of<start_at::last_used, stop_when::greater_equal> {}; // same, from where we stopped
struct best_fit : predicate_of<start_at::begin, stop_when::min_fit> {};        // smallest class >= target
struct worst_fit : predicate_of<start_at::begin, stop_when::max_value> {};     // the largest class

} // namespace allotheque
