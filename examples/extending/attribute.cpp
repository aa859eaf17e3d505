// Writing an attribute: `arena`, the 1 MiB region of memory a chunk lies in.
// A request names its arena either with a value riding on the request
// (request_with<arena::id>) or, for a plain request, through its hint; a
// subsystem can then keep its objects together without pointing at a
// neighbour. See docs/extending.md, "Writing an attribute".
#include <allotheque/allotheque.hpp>

#include <cstdint>
#include <cstdio>
#include <map>
#include <vector>

namespace al = allotheque;

struct arena {
    struct id {   // what a request carries
        std::uint64_t value;
    };
    using value_type = std::uint64_t;
    static constexpr bool is_explicit = false;      // computed from the address: costs no byte in a class node
    static constexpr bool from_address = true;      // a region of memory: its predicate must be able to leave it
    static constexpr std::size_t stored_bytes = 0;
    static constexpr unsigned width = 47 - 20;      // bits [20, 47): what sparse_identity sizes its index by

    static value_type of_chunk(const std::byte* p, std::size_t) noexcept {
        return (reinterpret_cast<std::uintptr_t>(p) >> 20) & ((std::uint64_t{1} << width) - 1);
    }
    template <al::request_like R>
    static value_type of_request(const R& r) noexcept {
        if constexpr (requires { r.template get<id>(); }) return r.template get<id>().value;
        else return of_chunk(static_cast<const std::byte*>(r.hint), 0);
    }
};
static_assert(al::address_attribute<arena> && al::bounded_attribute<arena>);

// Velox's shape with arenas for vicinities: the arena asked for, else the one
// used last, else the lowest one with the size.
using arenas = al::hash_table<arena, al::list<al::size, al::list<void>, al::match>, al::match_last_first,
                              al::sparse_identity>;

int main() {
    al::heap<arenas, al::mmap_source> heap;
    constexpr std::size_t n = 64;
    auto arena_of = [](void* p) { return arena::of_chunk(static_cast<std::byte*>(p), 0); };

    // Allocate until the blocks span three arenas, each with a few blocks.
    std::map<std::uint64_t, std::vector<void*>> by_arena;
    auto enough = [&] {
        if (by_arena.size() < 3) return false;
        for (const auto& [a, blocks] : by_arena)
            if (blocks.size() < 4) return false;
        return true;
    };
    for (std::size_t i = 0; !enough() && i < 1'000'000; ++i) {
        void* p = heap.allocate(al::request{n});
        by_arena[arena_of(p)].push_back(p);
    }
    if (!enough()) {
        std::puts("FAIL: the heap did not grow over three arenas");
        return 1;
    }
    // Free every other block of each arena.
    std::map<std::uint64_t, std::size_t> freed;
    for (auto& [a, blocks] : by_arena)
        for (std::size_t i = 0; i < blocks.size(); i += 2) {
            heap.deallocate(blocks[i], al::request{n});
            blocks[i] = nullptr;
            ++freed[a];
        }

    int failures = 0;
    for (const auto& [a, count] : freed) {
        // By name: a request_with<arena::id> carries the arena's id.
        void* p = heap.allocate(al::with(al::request{n}, arena::id{a}));
        // By hint: a plain request next to a live block of that arena.
        void* q = heap.allocate(al::request{n, by_arena[a][1], 0});
        std::printf("arena %#llx (%zu blocks freed): by id -> arena %#llx, by hint -> arena %#llx\n",
                    static_cast<unsigned long long>(a), count, static_cast<unsigned long long>(arena_of(p)),
                    static_cast<unsigned long long>(arena_of(q)));
        failures += arena_of(p) != a;
        failures += arena_of(q) != a;
        heap.deallocate(p, al::request{n});
        heap.deallocate(q, al::request{n});
    }
    for (auto& [a, blocks] : by_arena)
        for (void* p : blocks)
            if (p) heap.deallocate(p, al::request{n});
    std::puts(failures == 0 ? "ok: every request landed in the arena it named" : "FAIL");
    return failures == 0 ? 0 : 1;
}
