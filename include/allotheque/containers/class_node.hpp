// The part of a class node that every class container shares: the class's
// value when the attribute is explicit, the host chunk's size when a nested
// level needs it to judge the host, and the nested partition's header.
#pragma once
#include <cstddef>
#include <new>

#include <allotheque/attributes/attribute.hpp>
#include <allotheque/detail/slot.hpp>

namespace allotheque {

// Whether a partition's `accepts` looks at a chunk's size.
template <class P>
inline constexpr bool reads_size = P::reads_size;

template <class Derived, class Attr, class Nested>
struct class_node_base {
    static constexpr bool stores_host_size = !size_attribute<Attr> && reads_size<Nested>;

    [[no_unique_address]] detail::slot<Attr::is_explicit, typename Attr::value_type> stored_value;
    [[no_unique_address]] detail::slot<stores_host_size, std::size_t> stored_size;
    typename Nested::header_type nested;

    std::byte* host() noexcept { return reinterpret_cast<std::byte*>(static_cast<Derived*>(this)); }
    const std::byte* host() const noexcept {
        return reinterpret_cast<const std::byte*>(static_cast<const Derived*>(this));
    }
    typename Attr::value_type value() const noexcept {
        if constexpr (Attr::is_explicit) return stored_value;
        else return Attr::of_chunk(host(), 0);
    }
    std::size_t host_size() const noexcept {
        if constexpr (size_attribute<Attr>) return value();   // stored, or read from the host (block_size)
        else if constexpr (stores_host_size) return stored_size;
        else return 0;   // nobody below looks at it
    }

    // Turns free chunk [p, p+n) into the node of its own, new, class.
    static Derived* make(std::byte* p, std::size_t n) noexcept {
        auto* d = ::new (static_cast<void*>(p)) Derived();
        if constexpr (Attr::is_explicit) d->stored_value = Attr::of_chunk(p, n);
        if constexpr (stores_host_size) d->stored_size = n;
        Nested::init(d->nested);
        return d;
    }
};

} // namespace allotheque
