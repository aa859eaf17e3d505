// Allocation predicates: how a container walks its classes.
//
// A predicate is a start position × a stop test, plus what to do when the
// looked-up class cannot serve the request. The traversal belongs to the
// container (see containers/search.hpp); the predicate only says where to start,
// when to stop and whether the container must remember the class it last used.
#pragma once
#include <concepts>

namespace allotheque {

enum class start_at { begin, last_used, lookup };
enum class stop_when { always, equal, greater_equal, min_fit, max_value };
enum class fallback_to { none, first, last_then_first, last_only_then_first };

template <start_at Start, stop_when Stop, fallback_to Fallback = fallback_to::none>
struct predicate_of {
    static constexpr start_at start = Start;
    static constexpr stop_when stop = Stop;
    static constexpr fallback_to fallback = Fallback;
    // Starting from, or falling back to, the last used class means caching it.
    static constexpr bool remembers = Start == start_at::last_used || Fallback == fallback_to::last_then_first ||
                                      Fallback == fallback_to::last_only_then_first;
};

template <class P>
concept allocation_predicate = requires {
    { P::start } -> std::convertible_to<start_at>;
    { P::stop } -> std::convertible_to<stop_when>;
    { P::fallback } -> std::convertible_to<fallback_to>;
    { P::remembers } -> std::convertible_to<bool>;
};

// Only equality without fallback guarantees that a class found by size holds
// exactly the requested size. Anything else may return a larger chunk (which
// needs splitting) or, with a fallback, a different size altogether.
template <class P>
inline constexpr bool is_exact_match = P::stop == stop_when::equal && P::fallback == fallback_to::none;

// A predicate that can serve a request from a class other than the requested
// value: required on address attributes, since fresh memory lands anywhere.
template <class P>
inline constexpr bool can_leave_target = P::stop != stop_when::equal || P::fallback != fallback_to::none;

} // namespace allotheque
