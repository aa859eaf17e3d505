// expect: the attribute needs a static `width`
// An identity hash makes one class per value: it needs the attribute's width.
#include <allotheque/allotheque.hpp>

#include <cstdint>

namespace al = allotheque;

struct region {   // a well-formed attribute, without `width`
    using value_type = std::uint64_t;
    static constexpr bool is_explicit = false;
    static constexpr bool from_address = true;
    static constexpr std::size_t stored_bytes = 0;
    static value_type of_chunk(const std::byte* p, std::size_t) noexcept {
        return reinterpret_cast<std::uintptr_t>(p) >> 20;
    }
    static value_type of_request(const al::request& r) noexcept { return of_chunk(static_cast<const std::byte*>(r.hint), 0); }
};

al::heap<al::hash_table<region, al::list<al::size, al::list<void>, al::match>, al::match_last_first, al::sparse_identity>> h;
