// The attribute concept: what a container partitions free chunks by.
//
// An attribute is an unsigned integral value read both from a free chunk (its
// address and size) and from a request. Explicit attributes cannot be derived
// from the address and must be stored in the class node (size is the canonical
// one); implicit attributes are computed from the address and cost no bytes.
//
// Required: `value_type` (unsigned integral), `is_explicit`, `stored_bytes`,
// `of_chunk(const std::byte*, std::size_t)` and `of_request(const request&)`
// (a template over request_like to read request_with's extra values).
// Optional: `from_address = true` (an address attribute: its predicates must be
// able to leave the target), `is_size = true` (the size), `width` (values lie
// in [0, 2^width); the identity hashes need it).
#pragma once
#include <concepts>
#include <cstddef>
#include <type_traits>

#include <allotheque/request.hpp>

namespace allotheque {

// One named requirement each, so that a compiler's note on a type that is not
// an attribute names the member it lacks.
namespace requirements {
template <class A>
concept attribute_has_unsigned_value_type = requires {
    typename A::value_type;
    requires std::unsigned_integral<typename A::value_type>;
};
template <class A>
concept attribute_declares_is_explicit = requires { { A::is_explicit } -> std::convertible_to<bool>; };
template <class A>
concept attribute_declares_stored_bytes = requires {   // bytes a class node spends on it
    { A::stored_bytes } -> std::convertible_to<std::size_t>;
};
template <class A>
concept attribute_has_of_chunk = requires(const std::byte* chunk, std::size_t size) {
    { A::of_chunk(chunk, size) } -> std::same_as<typename A::value_type>;
};
template <class A>
concept attribute_has_of_request = requires(const request& r) {
    { A::of_request(r) } -> std::same_as<typename A::value_type>;
};
// Values lie in [0, 2^width): what a hash that makes one class per value (the
// identity hashes) sizes its table by. Other hashes do not need it.
template <class A>
concept attribute_declares_width = requires {
    { A::width } -> std::convertible_to<unsigned>;
    requires A::width <= 64;
};
} // namespace requirements

template <class A>
concept attribute = requirements::attribute_has_unsigned_value_type<A> &&
                    requirements::attribute_declares_is_explicit<A> && requirements::attribute_declares_stored_bytes<A> &&
                    requirements::attribute_has_of_chunk<A> && requirements::attribute_has_of_request<A>;

// An attribute whose values have a known number of bits.
template <class A>
concept bounded_attribute = attribute<A> && requirements::attribute_declares_width<A>;

// Whether the attribute is derived from a chunk's address: a class of such an
// attribute is a region of memory, and fresh memory from the system lands in a
// class nobody asked for. Predicates on it therefore need a fallback.
template <class A>
concept address_attribute = attribute<A> && requires { requires A::from_address; };

template <class A>
concept size_attribute = attribute<A> && requires { requires A::is_size; };

} // namespace allotheque
