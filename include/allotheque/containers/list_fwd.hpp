// The primary `list` template: list.hpp defines the terminal `list<void>` and
// the class container, element_list.hpp the element list `list<Attr, void,
// Pred>`. list.hpp includes element_list.hpp, so every form of `list` is
// complete after `#include <allotheque/containers/list.hpp>`.
#pragma once
#include <type_traits>

#include <allotheque/attributes/attribute.hpp>
#include <allotheque/containers/links.hpp>
#include <allotheque/containers/partition.hpp>
#include <allotheque/predicates/fits.hpp>
#include <allotheque/predicates/predicate.hpp>

namespace allotheque {

namespace detail {
// Says which parameter of a list that matched no specialisation is wrong; the
// compiler's notes below each message name the requirement that failed.
template <class Attr, class Nested, class Pred>
struct list_diagnosis {
    static_assert(attribute<Attr>, "allotheque::list<Attr, ...>: Attr is not an attribute (see attributes/attribute.hpp)");
    static_assert(partition<Nested>,
                  "allotheque::list<Attr, Nested, ...>: Nested is not a partition (see containers/partition.hpp)");
    static_assert(allocation_predicate<Pred>,
                  "allotheque::list<Attr, Nested, Pred>: Pred is not an allocation predicate (see predicates/predicate.hpp)");
};
template <class Attr, class Pred>
struct list_diagnosis<Attr, void, Pred> {
    static_assert(attribute<Attr>, "allotheque::list<Attr, ...>: Attr is not an attribute (see attributes/attribute.hpp)");
    static_assert(allocation_predicate<Pred>,
                  "allotheque::list<Attr, void, Pred>: Pred is not an allocation predicate (see predicates/predicate.hpp)");
};
template <class Nested, class Pred>
struct list_diagnosis<void, Nested, Pred> {
    static_assert(std::is_void_v<Nested>, "allotheque::list<void, Nested>: the list of chunks takes no nested partition");
};
template <class Pred>
struct list_diagnosis<void, void, Pred> {
    static_assert(sizeof(Pred) == 0, "allotheque::list<void>: include <allotheque/containers/list.hpp>");
};
} // namespace detail

// Every well-formed list is one of the specialisations; this one is reached
// only when a parameter is not what it should be, and says which.
template <class Attr, class Nested = void, class Pred = any, class Links = singly_linked>
struct list {
    static_assert(sizeof(detail::list_diagnosis<Attr, Nested, Pred>) > 0);
};

} // namespace allotheque
