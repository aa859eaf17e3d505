// The matching predicates: look the target class up, then (maybe) fall back.
#pragma once
#include <allotheque/predicates/predicate.hpp>

namespace allotheque {

// First class equal to the target, found by walking from the beginning.
struct match : predicate_of<start_at::begin, stop_when::equal> {};
// The target class by direct lookup and nothing else (Kingsley's bins).
struct match_only : predicate_of<start_at::lookup, stop_when::equal> {};
// The target class, else the first class that can serve (lowest address for
// address attributes).
struct match_first : predicate_of<start_at::lookup, stop_when::equal, fallback_to::first> {};
// The target class, else the class used last (temporal locality), else the
// first one (wilderness preservation): Velox and Medius.
struct match_last_first : predicate_of<start_at::lookup, stop_when::equal, fallback_to::last_then_first> {};
// The same over a table of sizes, with the class used last kept per size:
// the target's class, else the class the size was last taken from or freed
// into, else the first. A request without a hint targets that class, so it
// goes to the first at once. For classes that each hold one size (Medius'
// pages, whose spans hold one size each), where the class any size touched
// last never has the size asked for: the Medius malloc.
struct match_size_last_first : match_last_first {
    static constexpr bool last_per_size = true;
    // The chunk kept aside by a table that takes the last free is the class
    // used last's: not this one's.
    static constexpr bool takes_last_free = false;
};
// Look at the last used class first and take it when it equals the target
// (saving a lookup), else the target, else last, else first: Defero's `next`.
struct match_next : predicate_of<start_at::lookup, stop_when::equal, fallback_to::last_only_then_first> {};

} // namespace allotheque
