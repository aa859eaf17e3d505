// Identity hashes over an attribute's whole value range.
//   dense_identity:  a table of 2^width classes (Medius: SK-bit classes).
//   sparse_identity: a radix of lazily mapped leaves for ranges too wide for a
//                    table (Velox: 2^31 K-classes on 47-bit addresses).
#pragma once
#include <cstddef>

#include <allotheque/containers/class_index.hpp>

namespace allotheque {

struct dense_identity {
    static constexpr bool exact = true;
    template <class Attr>
    static constexpr std::size_t index_of(typename Attr::value_type v) noexcept { return static_cast<std::size_t>(v); }
    template <class Attr, class Header, class Init>
    using index = dense_index<(std::size_t{1} << Attr::width), Header, Init>;
};

struct sparse_identity {
    static constexpr bool exact = true;
    template <class Attr>
    static constexpr std::size_t index_of(typename Attr::value_type v) noexcept { return static_cast<std::size_t>(v); }
    template <class Attr, class Header, class Init>
    using index = sparse_index<Attr::width, Header, Init>;
};

} // namespace allotheque
