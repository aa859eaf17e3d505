// The generic class search: a predicate drives a container's traversal.
//
// A container exposes its classes through a small cursor interface (first,
// next, lookup, value, and a remembered last class); `search` walks them in the
// order the predicate asks for and calls `attempt` on each candidate class.
// `attempt` allocates from the class's nested partition and returns nullptr when
// the class cannot serve the request after all, so the walk goes on.
#pragma once
#include <concepts>
#include <cstddef>

#include <allotheque/predicates/predicate.hpp>

namespace allotheque {

template <class C>
concept class_cursor = requires(C& c, typename C::handle h, typename C::value_type v) {
    { c.none() } -> std::same_as<typename C::handle>;
    { c.first() } -> std::same_as<typename C::handle>;
    { c.next(h) } -> std::same_as<typename C::handle>;
    { c.lookup(v) } -> std::same_as<typename C::handle>;
    { c.value(h) } -> std::same_as<typename C::value_type>;
    { c.last() } -> std::same_as<typename C::handle>;
};

template <allocation_predicate Pred, class_cursor C, class Attempt>
std::byte* search(C& c, typename C::value_type target, Attempt&& attempt) {
    using handle = typename C::handle;
    const handle none = c.none();

    if constexpr (Pred::start == start_at::lookup) {
        handle looked = none;
        [[maybe_unused]] handle cached = none;
        if constexpr (Pred::fallback == fallback_to::last_only_then_first) {
            // Defero's `next`: the cached class is checked before any lookup.
            if (handle l = c.last(); l != none && c.value(l) == target) {
                if (std::byte* p = attempt(l)) return p;
                cached = l;   // it is the target class: the lookup would find it again
            }
        }
        looked = c.lookup(target);
        if (looked != none && looked != cached)
            if (std::byte* p = attempt(looked)) return p;
        if constexpr (Pred::fallback == fallback_to::none) {
            return nullptr;
        } else {
            handle tried_last = none;
            if constexpr (Pred::fallback != fallback_to::first) {
                if (handle l = c.last(); l != none && l != looked) {
                    if (std::byte* p = attempt(l)) return p;
                    tried_last = l;
                }
            }
            // A container may know a lower bound for where the walk can first
            // succeed (see hash_table's scan memo); it learns where it ended.
            handle from = c.first();
            if constexpr (requires { c.walk_start(); }) from = c.walk_start();
            for (handle h = from; h != none; h = c.next(h))
                if (h != looked && h != tried_last)
                    if (std::byte* p = attempt(h)) {
                        if constexpr (requires { c.walk_ended(h); }) c.walk_ended(h);
                        return p;
                    }
            if constexpr (requires { c.walk_ended(none); }) c.walk_ended(none);
            return nullptr;
        }
    } else {
        auto fits = [&](handle h) {
            if constexpr (Pred::stop == stop_when::equal) return c.value(h) == target;
            else if constexpr (Pred::stop == stop_when::always) return true;
            else return c.value(h) >= target;
        };
        if constexpr (Pred::stop == stop_when::min_fit || Pred::stop == stop_when::max_value) {
            // One pass to find the extreme class; a class that then refuses
            // (its nested partition cannot serve) falls back to a linear walk.
            handle best = none;
            for (handle h = c.first(); h != none; h = c.next(h)) {
                if (Pred::stop == stop_when::min_fit && !fits(h)) continue;
                if (Pred::stop == stop_when::min_fit && c.value(h) == target) {   // cannot do better
                    best = h;
                    break;
                }
                if (best == none || (Pred::stop == stop_when::min_fit ? c.value(h) < c.value(best)
                                                                      : c.value(h) > c.value(best)))
                    best = h;
            }
            if (best == none) return nullptr;
            if (std::byte* p = attempt(best)) return p;
            for (handle h = c.first(); h != none; h = c.next(h))
                if (h != best && (Pred::stop == stop_when::max_value || fits(h)))
                    if (std::byte* p = attempt(h)) return p;
            return nullptr;
        } else {
            handle from = none;
            if constexpr (Pred::start == start_at::last_used) from = c.last();
            if (from == none) from = c.first();
            for (handle h = from; h != none; h = c.next(h))
                if (fits(h))
                    if (std::byte* p = attempt(h)) return p;
            if constexpr (Pred::start == start_at::last_used) {
                // Wrap around: the classes before the remembered one.
                for (handle h = c.first(); h != none && h != from; h = c.next(h))
                    if (fits(h))
                        if (std::byte* p = attempt(h)) return p;
            }
            return nullptr;
        }
    }
}

} // namespace allotheque
