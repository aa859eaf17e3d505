// Allocation predicates: which class a container serves a request from.
//
// A predicate is any type with a static
//     template <class_cursor C, class Attempt>
//     std::byte* search(C& c, typename C::value_type target, Attempt&& attempt);
// that tries classes of the container behind cursor `c` (containers/search.hpp)
// in its own order, returns what the first successful `attempt` returned, or
// nullptr; plus two declared traits that the heaps check compositions with:
//     static constexpr bool exact;             // a class it serves from always has the target value
//     static constexpr bool can_leave_target;  // it may serve from a class whose value is not the target
// (both true is a contradiction and does not satisfy the concept). Optional,
// false when absent:
//     remembers      the container keeps the class last served from (c.last())
//     remembers_frees  ... and a free makes its class the last used one too
//                    (a chunk just freed is the one most likely in cache); only
//                    meaningful with remembers
//     lookup_only    search uses c.lookup only: a hash table may then keep a
//                    plain table with no bitmap of non-empty classes
//     guided_walks   search's walk for the first class able to serve follows
//                    the container's guide (guided_cursor): the container
//                    keeps a guide only for such predicates
//     takes_last_free  search tries the target's class, and when that cannot
//                    serve, the class a free touched last (remembers_frees)
//                    before any other: a container whose classes hand back
//                    the chunk freed last may then keep that chunk out of its
//                    classes until the next operation (see hash_table)
//     last_per_size  with remembers, over a table of sizes (size_fronts): the
//                    class used last is the one the requested size was last
//                    taken from or freed into, not the one any size touched
//                    last (where each class holds one size, as a page of
//                    one-size spans does, that one never has the size)
//     wants_sorted   the answer does not depend on the order classes are kept
//                    in and is found soonest when they ascend: a container that
//                    chooses its order (an element list) then keeps it sorted
//                    and offers lower_bound
// and, optional too, `static bool accepts(V have, V want)`: would a container
// whose only class has value `have` serve `want` from it? A container asks this
// about a class's host chunk. Absent, it is derived by running `search` on such
// a one-class cursor.
//
// `predicate_of<start_at, stop_when, fallback_to>` builds the paper's
// predicates (start position × termination, plus a fallback for lookups) with
// every trait derived; predicates/fits.hpp and match.hpp name them, and
// predicates/nearest.hpp is a predicate written against the protocol alone.
#pragma once
#include <concepts>
#include <cstddef>
#include <type_traits>

#include <allotheque/containers/search.hpp>

namespace allotheque {

enum class start_at { begin, last_used, lookup };
enum class stop_when { always, equal, greater_equal, min_fit, max_value };
enum class fallback_to { none, first, last_then_first, last_only_then_first };

namespace detail {
// An enum class accepts any value of its underlying type: `fallback_to(4)` is
// a valid constant, and a switch over the enumerators would treat it as some
// other case. These say whether a value is one of the named ones.
constexpr bool is_enumerator(start_at s) noexcept {
    return s == start_at::begin || s == start_at::last_used || s == start_at::lookup;
}
constexpr bool is_enumerator(stop_when s) noexcept {
    return s == stop_when::always || s == stop_when::equal || s == stop_when::greater_equal ||
           s == stop_when::min_fit || s == stop_when::max_value;
}
constexpr bool is_enumerator(fallback_to f) noexcept {
    return f == fallback_to::none || f == fallback_to::first || f == fallback_to::last_then_first ||
           f == fallback_to::last_only_then_first;
}

// A container with one class of value `v`: what `accepts` is derived on.
template <class V>
struct single_class_cursor {
    using handle = bool;   // true: the class
    using value_type = V;
    V v;
    handle none() const noexcept { return false; }
    handle first() const noexcept { return true; }
    handle next(handle) const noexcept { return false; }
    handle lookup(value_type w) const noexcept { return w == v; }
    value_type value(handle) const noexcept { return v; }
    handle last() const noexcept { return false; }
    handle lower_bound(value_type w) const noexcept { return v >= w; }
    handle prev(handle h) const noexcept { return !h; }
};
} // namespace detail

// ---- the concept: one named requirement each, so that a compiler's note on a
// type that is not a predicate names the requirement it misses. ------------------
namespace requirements {
template <class P>
concept predicate_declares_exact = requires {
    { P::exact } -> std::convertible_to<bool>;
    typename std::bool_constant<bool(P::exact)>;   // a compile-time constant
};
template <class P>
concept predicate_declares_can_leave_target = requires {
    { P::can_leave_target } -> std::convertible_to<bool>;
    typename std::bool_constant<bool(P::can_leave_target)>;
};
// A predicate that may serve another class cannot promise the target's value.
template <class P>
concept predicate_exact_and_can_leave_target_exclusive = !(bool(P::exact) && bool(P::can_leave_target));
template <class P>
concept predicate_has_search = requires(cursor_archetype& c, cursor_archetype::value_type v, attempt_archetype& a) {
    { P::search(c, v, a) } -> std::same_as<std::byte*>;
};
// Optional traits, when declared, are compile-time booleans.
template <class P>
concept predicate_remembers_is_bool =
    !requires { P::remembers; } || requires { typename std::bool_constant<bool(P::remembers)>; };
template <class P>
concept predicate_remembers_frees_is_bool =
    !requires { P::remembers_frees; } || requires { typename std::bool_constant<bool(P::remembers_frees)>; };
template <class P>
concept predicate_lookup_only_is_bool =
    !requires { P::lookup_only; } || requires { typename std::bool_constant<bool(P::lookup_only)>; };
template <class P>
concept predicate_guided_walks_is_bool =
    !requires { P::guided_walks; } || requires { typename std::bool_constant<bool(P::guided_walks)>; };
template <class P>
concept predicate_takes_last_free_is_bool =
    !requires { P::takes_last_free; } || requires { typename std::bool_constant<bool(P::takes_last_free)>; };
template <class P>
concept predicate_last_per_size_is_bool =
    !requires { P::last_per_size; } || requires { typename std::bool_constant<bool(P::last_per_size)>; };
template <class P>
concept predicate_wants_sorted_is_bool =
    !requires { P::wants_sorted; } || requires { typename std::bool_constant<bool(P::wants_sorted)>; };
template <class P>
concept predicate_accepts_returns_bool = !requires(std::size_t v) { P::accepts(v, v); } || requires(std::size_t v) {
    { P::accepts(v, v) } -> std::convertible_to<bool>;
};
// A predicate that exposes predicate_of's parameters must use named values.
template <class P>
concept predicate_start_is_a_start_at_enumerator =
    !requires { P::start; } || (std::same_as<std::remove_cv_t<decltype(P::start)>, start_at> &&
                                detail::is_enumerator(P::start));
template <class P>
concept predicate_stop_is_a_stop_when_enumerator =
    !requires { P::stop; } || (std::same_as<std::remove_cv_t<decltype(P::stop)>, stop_when> &&
                               detail::is_enumerator(P::stop));
template <class P>
concept predicate_fallback_is_a_fallback_to_enumerator =
    !requires { P::fallback; } || (std::same_as<std::remove_cv_t<decltype(P::fallback)>, fallback_to> &&
                                   detail::is_enumerator(P::fallback));
} // namespace requirements

template <class P>
concept allocation_predicate =
    requirements::predicate_declares_exact<P> && requirements::predicate_declares_can_leave_target<P> &&
    requirements::predicate_exact_and_can_leave_target_exclusive<P> && requirements::predicate_has_search<P> &&
    requirements::predicate_remembers_is_bool<P> && requirements::predicate_remembers_frees_is_bool<P> &&
    requirements::predicate_lookup_only_is_bool<P> &&
    requirements::predicate_guided_walks_is_bool<P> && requirements::predicate_wants_sorted_is_bool<P> &&
    requirements::predicate_takes_last_free_is_bool<P> && requirements::predicate_last_per_size_is_bool<P> &&
    requirements::predicate_accepts_returns_bool<P> && requirements::predicate_start_is_a_start_at_enumerator<P> &&
    requirements::predicate_stop_is_a_stop_when_enumerator<P> &&
    requirements::predicate_fallback_is_a_fallback_to_enumerator<P>;

// ---- reading the traits --------------------------------------------------------

// A class found by this predicate always holds the requested value.
template <class P>
inline constexpr bool is_exact_match = bool(P::exact);

// The predicate can serve a request from a class other than the requested
// value: required on address attributes, since fresh memory lands anywhere.
template <class P>
inline constexpr bool can_leave_target = bool(P::can_leave_target);

template <class P>
inline constexpr bool predicate_remembers = false;
template <class P>
    requires requires { P::remembers; }
inline constexpr bool predicate_remembers<P> = bool(P::remembers);

// Only a remembering predicate can count frees as uses.
template <class P>
inline constexpr bool predicate_remembers_frees = false;
template <class P>
    requires requires { P::remembers_frees; }
inline constexpr bool predicate_remembers_frees<P> = predicate_remembers<P> && bool(P::remembers_frees);

template <class P>
inline constexpr bool predicate_lookup_only = false;
template <class P>
    requires requires { P::lookup_only; }
inline constexpr bool predicate_lookup_only<P> = bool(P::lookup_only);

template <class P>
inline constexpr bool predicate_guided_walks = false;
template <class P>
    requires requires { P::guided_walks; }
inline constexpr bool predicate_guided_walks<P> = bool(P::guided_walks);

// Meaningful only with remembers_frees: the class a free touched last must be
// the one the search falls back to.
template <class P>
inline constexpr bool predicate_takes_last_free = false;
template <class P>
    requires requires { P::takes_last_free; }
inline constexpr bool predicate_takes_last_free<P> = predicate_remembers_frees<P> && bool(P::takes_last_free);

// Meaningful only with remembers, and only over a table of sizes.
template <class P>
inline constexpr bool predicate_last_per_size = false;
template <class P>
    requires requires { P::last_per_size; }
inline constexpr bool predicate_last_per_size<P> = predicate_remembers<P> && bool(P::last_per_size);

template <class P>
inline constexpr bool predicate_wants_sorted = false;
template <class P>
    requires requires { P::wants_sorted; }
inline constexpr bool predicate_wants_sorted<P> = bool(P::wants_sorted);

// Could a class whose value is `have` serve a request for `want`?
template <class Pred, class V>
constexpr bool value_accepts(V have, V want) noexcept {
    if constexpr (requires { Pred::accepts(have, want); }) {
        return Pred::accepts(have, want);
    } else {
        std::byte any_chunk{};
        detail::single_class_cursor<V> c{have};
        return Pred::search(c, want, [&](bool) noexcept { return &any_chunk; }) != nullptr;
    }
}

// ---- predicate_of: the paper's predicates ---------------------------------------

template <start_at Start, stop_when Stop, fallback_to Fallback = fallback_to::none>
struct predicate_of {
    static_assert(detail::is_enumerator(Start),
                  "allotheque::predicate_of: Start is not a start_at enumerator (begin, last_used, lookup)");
    static_assert(detail::is_enumerator(Stop), "allotheque::predicate_of: Stop is not a stop_when enumerator "
                                               "(always, equal, greater_equal, min_fit, max_value)");
    static_assert(detail::is_enumerator(Fallback), "allotheque::predicate_of: Fallback is not a fallback_to "
                                                   "enumerator (none, first, last_then_first, last_only_then_first)");

    static constexpr start_at start = Start;
    static constexpr stop_when stop = Stop;
    static constexpr fallback_to fallback = Fallback;

    // Only equality without fallback guarantees that a class found by size holds
    // exactly the requested size. Anything else may return a larger chunk (which
    // needs splitting) or, with a fallback, a different size altogether.
    static constexpr bool exact = Stop == stop_when::equal && Fallback == fallback_to::none;
    static constexpr bool can_leave_target = !exact;
    // Starting from, or falling back to, the last used class means caching it.
    static constexpr bool remembers = Start == start_at::last_used || Fallback == fallback_to::last_then_first ||
                                      Fallback == fallback_to::last_only_then_first;
    // The paper's "last used K-class" (match last first) is the class an
    // allocation or a free touched last: in steady churn the hint's class
    // rarely holds the size, and the chunk freed a moment ago, still in
    // cache, is then the one taken instead of the lowest-address one.
    // Defero's `next` caches the class an allocation was served from.
    static constexpr bool remembers_frees = Fallback == fallback_to::last_then_first;
    // Lookup, then (fall_back) the class used last before any walk.
    static constexpr bool takes_last_free = Start == start_at::lookup && Fallback == fallback_to::last_then_first;
    static constexpr bool lookup_only = Start == start_at::lookup && Fallback == fallback_to::none;
    static constexpr bool guided_walks = Fallback != fallback_to::none;
    static constexpr bool wants_sorted = Stop == stop_when::min_fit;

    template <class V>
    static constexpr bool accepts(V have, V want) noexcept {
        if constexpr (Fallback != fallback_to::none) return true;
        else if constexpr (Stop == stop_when::equal) return have == want;
        else if constexpr (Stop == stop_when::always) return true;
        else return have >= want;
    }

    // The lower-bound loop is inlined into the container, as a hand-written
    // segregated allocator would have it; the other searches are one function
    // each, with a lookup's fallback out of line (fall_back).
    template <class C, class Attempt>
    [[gnu::always_inline]] static std::byte* search(C& c, typename C::value_type target, Attempt&& attempt) {
        if constexpr (Start == start_at::begin && (Stop == stop_when::greater_equal || Stop == stop_when::min_fit) &&
                      ordered_cursor<C>) {
            // Ordered classes: start at the lower bound; the first class that
            // fits is also the best fit, and every later one fits too.
            for (auto h = c.lower_bound(target); h != c.none(); h = c.next(h))
                if (std::byte* p = attempt(h)) return p;
            return nullptr;
        } else {
            return walk(c, target, attempt);
        }
    }

private:
    template <class C, class Attempt>
    static std::byte* walk(C& c, typename C::value_type target, Attempt& attempt) {
        using handle = typename C::handle;
        const handle none = c.none();

        if constexpr (Start == start_at::lookup) {
            handle looked = none;
            [[maybe_unused]] handle cached = none;
            if constexpr (Fallback == fallback_to::last_only_then_first) {
                // Defero's `next`: the cached class is checked before any lookup.
                if (handle l = c.last(); l != none && c.value(l) == target) {
                    if (std::byte* p = attempt(l)) return p;
                    cached = l;   // it is the target class: the lookup would find it again
                }
            }
            looked = c.lookup(target);
            if (looked != none && looked != cached)
                if (std::byte* p = attempt(looked)) return p;
            if constexpr (Fallback == fallback_to::none) return nullptr;
            else return fall_back(c, attempt, looked);
        } else {
            auto fits = [&](handle h) {
                if constexpr (Stop == stop_when::equal) return c.value(h) == target;
                else if constexpr (Stop == stop_when::always) return true;
                else return c.value(h) >= target;
            };
            if constexpr (Stop == stop_when::min_fit || Stop == stop_when::max_value) {
                // One pass to find the extreme class; a class that then refuses
                // (its nested partition cannot serve) falls back to a linear walk.
                constexpr bool min = Stop == stop_when::min_fit;
                handle best = none;
                for (handle h = c.first(); h != none; h = c.next(h)) {
                    if (min && !fits(h)) continue;
                    if (min && c.value(h) == target) {   // cannot do better
                        best = h;
                        break;
                    }
                    if (best == none || (min ? c.value(h) < c.value(best) : c.value(h) > c.value(best))) best = h;
                }
                if (best == none) return nullptr;
                if (std::byte* p = attempt(best)) return p;
                for (handle h = c.first(); h != none; h = c.next(h))
                    if (h != best && (!min || fits(h)))
                        if (std::byte* p = attempt(h)) return p;
                return nullptr;
            } else {
                handle from = none;
                if constexpr (Start == start_at::last_used) from = c.last();
                if (from == none) from = c.first();
                for (handle h = from; h != none; h = c.next(h))
                    if (fits(h))
                        if (std::byte* p = attempt(h)) return p;
                if constexpr (Start == start_at::last_used) {
                    // Wrap around: the classes before the remembered one.
                    for (handle h = c.first(); h != none && h != from; h = c.next(h))
                        if (fits(h))
                            if (std::byte* p = attempt(h)) return p;
                }
                return nullptr;
            }
        }
    }

    // The target's class could not serve: the class used last, then a walk.
    // Out of line, so that the lookup that succeeds stays small where it is
    // inlined (the walk and its guide are the long, rarer path). The cursor
    // and the attempt come by value (each is a few references): by reference,
    // the caller built both in memory on every call, hits included, which
    // cost Velox and Medius a tenth of their LIFO pair.
    template <class C, class Attempt>
    [[gnu::noinline]] static std::byte* fall_back(C c, Attempt attempt, typename C::handle looked) {
        using handle = typename C::handle;
        const handle none = c.none();
        handle tried_last = none;
        if constexpr (Fallback != fallback_to::first) {
            if (handle l = c.last(); l != none && l != looked) {
                if (std::byte* p = attempt(l)) return p;
                tried_last = l;
            }
        }
        if constexpr (guided_cursor<C>) {
            // The container knows which classes may serve (its guide), and
            // learns from every class that could not.
            for (handle h = c.walk_start(); h != none; h = c.walk_next(h))
                if (h != looked && h != tried_last)
                    if (std::byte* p = attempt(h)) {
                        c.walk_ended(h);
                        return p;
                    }
            c.walk_ended(none);
        } else {
            for (handle h = c.first(); h != none; h = c.next(h))
                if (h != looked && h != tried_last)
                    if (std::byte* p = attempt(h)) return p;
        }
        return nullptr;
    }
};

} // namespace allotheque
