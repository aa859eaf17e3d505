// `bounded<Pred, MaxClasses>`: Pred's search, shown at most MaxClasses classes.
//
// A walk over a container whose classes may all refuse (an element list of
// blocks too small for the request) costs one step per class, and nothing
// else bounds it: a first fit over a Lea bin of 100,000 small blocks walked
// them all on every malloc. Bounded, the predicate sees the classes Pred would
// visit, in Pred's order, until MaxClasses of them have been handed out; then
// the cursor says "no more" and the search fails as if the container ended
// there. A container above moves on (a hash table to its next non-empty
// class), so a bounded level turns "walk the bin" into "try a few, then
// escalate" without any code in the heap.
//
// What it changes: a class that would have served but lies past the bound is
// not found by this search (it stays where it is, for a later request that
// reaches it sooner). The bound counts the handles the predicate receives
// (first, next, lower_bound, prev, lookup, last): a container's own work
// inside one of those calls (an element list's lookup walks) is not bounded.
//
// Written against the predicate protocol alone (predicates/predicate.hpp):
// the cursor it hands Pred forwards the capabilities of the container's
// cursor (lower_bound, prev) but never the guide's hooks (walk memo, size directory), because a
// truncated walk that found nothing must not teach the guide that nothing is
// there; for the same reason the adaptor does not declare `guided_walks`.
#pragma once
#include <cstddef>

#include <allotheque/containers/search.hpp>
#include <allotheque/predicates/predicate.hpp>

namespace allotheque {

template <allocation_predicate Pred, std::size_t MaxClasses>
struct bounded {
    static_assert(MaxClasses > 0, "allotheque::bounded: a search shown no class can never serve");

    static constexpr bool exact = is_exact_match<Pred>;
    static constexpr bool can_leave_target = allotheque::can_leave_target<Pred>;
    static constexpr bool remembers = predicate_remembers<Pred>;
    static constexpr bool remembers_frees = predicate_remembers_frees<Pred>;
    static constexpr bool lookup_only = predicate_lookup_only<Pred>;
    static constexpr bool wants_sorted = predicate_wants_sorted<Pred>;
    static constexpr std::size_t max_classes = MaxClasses;

    // A one-class container is within any bound: the answer is Pred's.
    template <class V>
    static constexpr bool accepts(V have, V want) noexcept {
        return value_accepts<Pred>(have, want);
    }

    // The container's cursor, handing out at most MaxClasses handles.
    template <class_cursor C>
    struct cursor {
        using handle = typename C::handle;
        using value_type = typename C::value_type;
        C& inner;
        std::size_t left = MaxClasses;

        handle none() const noexcept { return inner.none(); }
        handle first() noexcept { return count(inner.first()); }
        handle next(handle h) noexcept { return count(inner.next(h)); }
        handle lookup(value_type v) noexcept { return count(inner.lookup(v)); }
        value_type value(handle h) const noexcept { return inner.value(h); }
        handle last() noexcept { return count(inner.last()); }
        handle lower_bound(value_type v) noexcept
            requires ordered_cursor<C>
        {
            return count(inner.lower_bound(v));
        }
        handle prev(handle h) noexcept
            requires bidirectional_cursor<C>
        {
            return count(inner.prev(h));
        }

    private:
        handle count(handle h) noexcept {
            if (h == inner.none()) return h;
            if (left == 0) return inner.none();
            --left;
            return h;
        }
    };

    // Inlined like predicate_of's search: on the exact bins below 512 bytes the
    // first block always fits, and the bound must cost nothing there.
    template <class_cursor C, class Attempt>
    [[gnu::always_inline]] static std::byte* search(C& c, typename C::value_type target, Attempt&& attempt) {
        cursor<C> b{c};
        return allotheque::search<Pred>(b, target, attempt);
    }
};

} // namespace allotheque
