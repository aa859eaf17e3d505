// The attribute concept: what a container partitions free chunks by.
//
// An attribute is an unsigned integral value read both from a free chunk (its
// address and size) and from a request. Explicit attributes cannot be derived
// from the address and must be stored in the class node (size is the canonical
// one); implicit attributes are computed from the address and cost no bytes.
#pragma once
#include <concepts>
#include <cstddef>
#include <type_traits>

#include <allotheque/request.hpp>

namespace allotheque {

template <class A>
concept attribute = requires(const std::byte* chunk, std::size_t size, const request& r) {
    typename A::value_type;
    requires std::unsigned_integral<typename A::value_type>;
    { A::is_explicit } -> std::convertible_to<bool>;
    { A::stored_bytes } -> std::convertible_to<std::size_t>;   // bytes a class node spends on it
    { A::of_chunk(chunk, size) } -> std::same_as<typename A::value_type>;
    { A::of_request(r) } -> std::same_as<typename A::value_type>;
};

// Whether the attribute is derived from a chunk's address: a class of such an
// attribute is a region of memory, and fresh memory from the system lands in a
// class nobody asked for. Predicates on it therefore need a fallback.
template <class A>
concept address_attribute = attribute<A> && requires { requires A::from_address; };

template <class A>
concept size_attribute = attribute<A> && requires { requires A::is_size; };

} // namespace allotheque
