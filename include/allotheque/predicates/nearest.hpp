// `nearest`: the class whose value is closest to the target (ties to the lower
// value), then the next closest, and so on until a class serves.
//
// On an address attribute this is "as close to the hint as the free memory
// allows": unlike match_last_first it never jumps to an unrelated class while a
// neighbour of the hint's class has room. It may leave the target, so a heap
// accepts it on address levels; it is not exact, and on a size level it may
// pick a smaller class, so use it on size only under a level that guarantees
// the fit.
//
// Written against the predicate protocol alone (predicates/predicate.hpp), as
// the worked example of docs/extending.md: it uses a container's `prev` and
// `lower_bound` when the cursor offers both (rb_tree: O(log n) to the first
// candidate, one step per further one), and one pass over the classes per
// candidate on any other cursor.
#pragma once
#include <cstddef>

#include <allotheque/containers/search.hpp>
#include <allotheque/predicates/predicate.hpp>

namespace allotheque {

struct nearest {
    static constexpr bool exact = false;
    static constexpr bool can_leave_target = true;   // any non-empty class will do, the closest first

    template <class_cursor C, class Attempt>
    static std::byte* search(C& c, typename C::value_type target, Attempt&& attempt) {
        if constexpr (bidirectional_cursor<C>) return outwards(c, target, attempt);
        else return by_rank(c, target, attempt);
    }

private:
    template <class V>
    static V distance(V a, V b) noexcept {
        return a > b ? a - b : b - a;
    }

    // Ordered classes: the neighbours on each side of the target, merged by
    // distance like two sorted lists (the lower side first on a tie).
    template <class C, class Attempt>
    static std::byte* outwards(C& c, typename C::value_type target, Attempt& attempt) {
        auto up = c.lower_bound(target);
        auto down = c.prev(up);
        while (up != c.none() || down != c.none()) {
            const bool take_down = up == c.none() || (down != c.none() && distance(c.value(down), target) <=
                                                                             distance(c.value(up), target));
            if (std::byte* p = attempt(take_down ? down : up)) return p;
            if (take_down) down = c.prev(down);
            else up = c.next(up);
        }
        return nullptr;
    }

    // Any cursor: classes ranked by (distance, value, position in the walk);
    // each pass finds the best-ranked class after the one that last refused.
    // A refusal changes nothing in the container, so positions are stable.
    template <class C, class Attempt>
    static std::byte* by_rank(C& c, typename C::value_type target, Attempt& attempt) {
        using V = typename C::value_type;
        struct rank {
            V distance;
            V value;
            std::size_t position;
            bool operator<(const rank& o) const noexcept {
                if (distance != o.distance) return distance < o.distance;
                if (value != o.value) return value < o.value;
                return position < o.position;
            }
        };
        bool refused = false;
        rank last_refused{};
        for (;;) {
            auto best = c.none();
            rank best_rank{};
            std::size_t position = 0;
            for (auto h = c.first(); h != c.none(); h = c.next(h), ++position) {
                const rank r{distance(c.value(h), target), c.value(h), position};
                if (refused && !(last_refused < r)) continue;
                if (best == c.none() || r < best_rank) {
                    best = h;
                    best_rank = r;
                }
            }
            if (best == c.none()) return nullptr;
            if (std::byte* p = attempt(best)) return p;
            refused = true;
            last_refused = best_rank;
        }
    }
};

static_assert(allocation_predicate<nearest>);

} // namespace allotheque
