// `size`: the one mandatory attribute. Explicit: a class of sizes stores its value.
#pragma once
#include <cstddef>

#include <allotheque/attributes/attribute.hpp>

namespace allotheque {

struct size {
    using value_type = std::size_t;
    static constexpr bool is_explicit = true;
    static constexpr bool is_size = true;
    static constexpr std::size_t stored_bytes = sizeof(value_type);

    static constexpr value_type of_chunk(const std::byte*, std::size_t n) noexcept { return n; }
    template <request_like R>
    static constexpr value_type of_request(const R& r) noexcept { return r.size; }
};

static_assert(size_attribute<size>);

} // namespace allotheque
