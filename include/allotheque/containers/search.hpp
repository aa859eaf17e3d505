// The one place where a container meets a predicate.
//
// A container shows its classes to a predicate through a cursor: a handle per
// class, walked with first/next, found by value with lookup, read with value,
// plus the class the container remembers having used last. Every container's
// allocate calls `search<Pred>(cursor, target, attempt)`, which hands the cursor
// to the predicate's own `search` (see predicates/predicate.hpp for the
// protocol). The predicate picks candidate classes in its order and calls
// `attempt` on each; `attempt` allocates from the class's nested partition and
// returns nullptr when the class cannot serve after all, so the walk goes on.
//
// What a container can do cheaply beyond the required interface it offers as
// optional cursor members (capabilities, one concept each below), and a
// predicate uses them when present: that is how an ordered container gives
// every predicate, not only the built-in ones, a lower-bound start.
#pragma once
#include <concepts>
#include <cstddef>

namespace allotheque {

// Required of every cursor. A failed attempt leaves the cursor's handles valid;
// a successful one may invalidate them (the predicate returns at once). A
// cursor is a view of its container's header, cheap to copy: a predicate may
// pass it by value (predicate_of does, to its out-of-line fallback).
template <class C>
concept class_cursor = std::copy_constructible<C> && requires(C& c, typename C::handle h, typename C::value_type v) {
    { c.none() } -> std::same_as<typename C::handle>;     // the past-the-end handle
    { c.first() } -> std::same_as<typename C::handle>;    // the first non-empty class, or none
    { c.next(h) } -> std::same_as<typename C::handle>;    // the class after h, or none
    { c.lookup(v) } -> std::same_as<typename C::handle>;  // the class of value v, or none
    { c.value(h) } -> std::same_as<typename C::value_type>;
    { c.last() } -> std::same_as<typename C::handle>;     // the class used last, or none (see `remembers`)
};

// ---- optional capabilities ------------------------------------------------

// An ordered container: first/next visit the classes in ascending value order,
// and lower_bound(v) is the first class whose value is >= v, or none.
template <class C>
concept ordered_cursor = class_cursor<C> && requires(C& c, typename C::value_type v) {
    { c.lower_bound(v) } -> std::same_as<typename C::handle>;
};

// An ordered container that also steps backwards: prev(h) is the class before
// h (none before the first), prev(none()) the last class.
template <class C>
concept bidirectional_cursor = ordered_cursor<C> && requires(C& c, typename C::handle h) {
    { c.prev(h) } -> std::same_as<typename C::handle>;
};

// A container that can guide a walk, in container order, for the first class
// able to serve one request: walk_start() is the first class worth trying
// (none: no class can serve), walk_next(h) the next one after an attempt on h
// failed, and walk_ended(h) says where the walk stopped (none: nothing found).
// A guide may skip classes but never one that can serve, so the walk's answer
// is the unguided walk's. hash_table guides with a size directory (the classes
// that may hold the request's size, containers/size_directory.hpp), rb_tree
// with a walk memo (containers/walk_memo.hpp). Offered only to predicates that
// declare `guided_walks`.
template <class C>
concept guided_cursor = class_cursor<C> && requires(C& c, typename C::handle h) {
    { c.walk_start() } -> std::same_as<typename C::handle>;
    { c.walk_next(h) } -> std::same_as<typename C::handle>;
    c.walk_ended(h);
};

// ---- archetypes: the least a predicate may count on ------------------------
// The allocation_predicate concept checks that a predicate's search accepts
// this cursor, which has the required members and no capability.
struct cursor_archetype {
    using handle = std::size_t;
    using value_type = std::size_t;
    handle none() const noexcept;
    handle first() noexcept;
    handle next(handle) noexcept;
    handle lookup(value_type) noexcept;
    value_type value(handle) const noexcept;
    handle last() const noexcept;
};
struct attempt_archetype {
    std::byte* operator()(cursor_archetype::handle) const noexcept;
};
static_assert(class_cursor<cursor_archetype> && !ordered_cursor<cursor_archetype>);

// ---- the hook -----------------------------------------------------------------
// Always inlined, like a predicate's dispatch (see predicate_of::search): the
// hook must cost nothing over a container calling the search loop itself.
template <class Pred, class_cursor C, class Attempt>
    requires requires(C& c, typename C::value_type v, Attempt& a) {
        { Pred::search(c, v, a) } -> std::same_as<std::byte*>;
    }
[[gnu::always_inline]] inline std::byte* search(C& c, typename C::value_type target, Attempt&& attempt) {
    return Pred::search(c, target, attempt);
}

} // namespace allotheque
