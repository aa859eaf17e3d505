// Where a std-style allocator gets its hint when the container gives none
// (standard containers never do). A policy is a stateless type asked with the
// heap; `near(p)` (scoped_hint.hpp) overrides any policy for a scope.
#pragma once
#include <concepts>

namespace allotheque {

// No preference: the heap's predicates fall back as they would for a null hint.
struct no_hint {
    template <class Heap>
    static const void* hint(const Heap&) noexcept { return nullptr; }
};

// Near the heap's previous allocation: a list's next node next to the last one,
// a map's node next to the one just inserted. Sound default for locality heaps.
struct near_previous {
    template <class Heap>
    static const void* hint(const Heap& h) noexcept { return h.last_allocation(); }
};

template <class P, class Heap>
concept hint_policy = requires(const Heap& h) {
    { P::hint(h) } -> std::convertible_to<const void*>;
};

// Heaps whose partition reads the hint default to near_previous, others to no_hint.
template <class Heap>
struct default_hint_policy {
    using type = no_hint;
};
template <class Heap>
    requires requires { Heap::locality_aware; } && Heap::locality_aware
struct default_hint_policy<Heap> {
    using type = near_previous;
};

} // namespace allotheque
