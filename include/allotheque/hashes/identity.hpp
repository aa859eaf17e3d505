// Identity hashes over an attribute's whole value range.
//   dense_identity:  a table of 2^width classes (Medius: SK-bit classes).
//   sparse_identity: a radix of lazily mapped leaves for ranges too wide for a
//                    table (Velox: 2^31 K-classes on 47-bit addresses).
#pragma once
#include <cstddef>

#include <allotheque/attributes/attribute.hpp>
#include <allotheque/containers/class_index.hpp>

namespace allotheque {

namespace detail {
// One class per value: the table has 2^width classes, so the attribute must say
// how wide its values are.
template <class Attr>
struct identity_width {
    static_assert(requirements::attribute_declares_width<Attr>,
                  "allotheque::dense_identity / sparse_identity: the attribute needs a static `width` (its values "
                  "lie in [0, 2^width)), since an identity hash makes one class per value");
    static constexpr unsigned value = [] {
        if constexpr (requirements::attribute_declares_width<Attr>) return unsigned(Attr::width);
        else return 1u;   // after the message, no cascade of errors
    }();
};
} // namespace detail

struct dense_identity {
    static constexpr bool exact = true;
    static constexpr bool identity = true;   // index_of(v) == v
    template <class Attr>
    static constexpr std::size_t index_of(typename Attr::value_type v) noexcept { return static_cast<std::size_t>(v); }
    template <class Attr, class Header, class Init>
    using index = dense_index<(std::size_t{1} << detail::identity_width<Attr>::value), Header, Init>;
};

struct sparse_identity {
    static constexpr bool exact = true;
    static constexpr bool identity = true;
    template <class Attr>
    static constexpr std::size_t index_of(typename Attr::value_type v) noexcept { return static_cast<std::size_t>(v); }
    template <class Attr, class Header, class Init>
    using index = sparse_index<detail::identity_width<Attr>::value, Header, Init>;
};

} // namespace allotheque
