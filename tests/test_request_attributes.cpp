// Requests carrying more than a size and a hint: a container reads its own
// attribute from the request by type, so an attribute can take its target from
// a value riding on request_with<...> instead of from the hint.
#include "catch.hpp"

#include <allotheque/allotheque.hpp>

#include <cstddef>
#include <cstdint>
#include <tuple>
#include <vector>

namespace al = allotheque;

namespace {

// A 1 MiB region of the address space, named by the caller (say, the arena a
// subsystem was given) rather than derived from a neighbour's address.
struct region {
    struct value {
        std::uint64_t id = 0;
    };
    using value_type = std::uint64_t;
    static constexpr bool is_explicit = false;
    static constexpr bool from_address = true;
    static constexpr std::size_t stored_bytes = 0;
    static constexpr unsigned width = 27;   // bits [20, 47)
    static value_type of_chunk(const std::byte* p, std::size_t) noexcept {
        return (reinterpret_cast<std::uintptr_t>(p) >> 20) & ((std::uint64_t{1} << width) - 1);
    }
    template <al::request_like R>
    static value_type of_request(const R& r) noexcept {
        if constexpr (requires { r.template get<value>(); }) return r.template get<value>().id;
        else return of_chunk(static_cast<const std::byte*>(r.hint), 0);   // plain requests: the hint's region
    }
};
static_assert(al::address_attribute<region>);

using regional = al::hash_table<region, al::list<al::size, al::list<void>, al::match>, al::match_last_first,
                                al::sparse_identity>;
using regional_heap = al::heap<regional, al::mmap_source>;
using tagged = al::request_with<region::value>;

tagged in_region(std::size_t n, std::uint64_t id) {
    tagged r;
    r.size = n;
    r.values = std::tuple<region::value>{region::value{id}};
    return r;
}

} // namespace

TEST_CASE("request_with: get<V>() finds a value by type", "[request]") {
    const tagged r = in_region(24, 7);
    CHECK(r.size == 24u);
    CHECK(r.hint == nullptr);
    CHECK(r.get<region::value>().id == 7u);
    CHECK(region::of_request(r) == 7u);
    static_assert(al::request_like<tagged>);
}

TEST_CASE("a partition reads its attribute from the request's extra value", "[request]") {
    regional_heap h;
    // Fill two regions: allocate until the blocks span at least two 1 MiB regions.
    std::vector<void*> blocks;
    while (blocks.size() < 200000) {
        blocks.push_back(h.allocate(al::request{64}));
        if (region::of_chunk(static_cast<std::byte*>(blocks.back()), 0) !=
            region::of_chunk(static_cast<std::byte*>(blocks.front()), 0))
            break;
    }
    void* first = blocks.front();
    void* other = blocks.back();
    const auto r_first = region::of_chunk(static_cast<std::byte*>(first), 0);
    const auto r_other = region::of_chunk(static_cast<std::byte*>(other), 0);
    REQUIRE(r_first != r_other);

    // Free one block in each region; the request names the region, not a neighbour.
    h.deallocate(first, al::request{64});
    h.deallocate(other, al::request{64});
    void* a = h.allocate(in_region(64, r_first));
    CHECK(a == first);
    void* b = h.allocate(in_region(64, r_other));
    CHECK(b == other);

    // Deallocation needs only the size: the chunk's region comes from its address.
    h.deallocate(a, in_region(64, r_first));
    h.deallocate(b, al::request{64});
    for (void* p : blocks)
        if (p != first && p != other) h.deallocate(p, al::request{64});
}
