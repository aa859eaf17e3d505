// expect: attribute_has_of_request
// An attribute that cannot read its value from a request.
#include <allotheque/allotheque.hpp>

namespace al = allotheque;

struct lines {   // the size in cache lines, read from chunks only
    using value_type = std::size_t;
    static constexpr bool is_explicit = true;
    static constexpr std::size_t stored_bytes = sizeof(value_type);
    static value_type of_chunk(const std::byte*, std::size_t n) noexcept { return (n + 63) / 64; }
};

al::list<lines, al::list<void>, al::match>::header_type h;
