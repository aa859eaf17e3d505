// Checks the room_heap prototype before its figures are believed: random
// allocations and frees (hinted and not, every size class, some sizes for the
// base heap) against a model of the live blocks. Each block is filled with a
// pattern derived from its id; a block handed out twice, overlapping another
// or placed outside its size would break a pattern. Also checks that a hint
// into a group with room is honoured, and that the room is kept only for a
// class that receives hints. Exits non-zero on the first failure.
#include <allotheque/allocators/velox.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "order/room_heap.hpp"

namespace {

int failures = 0;
void check(bool ok, const char* what) {
    if (!ok && failures++ < 10) std::fprintf(stderr, "room_heap check failed: %s\n", what);
}

struct block {
    unsigned char* p;
    std::size_t n;
    unsigned char tag;
};

template <std::size_t G>
void model_run(unsigned fill, unsigned chain, std::uint32_t seed) {
    bench::order::room_heap<allotheque::velox_heap<>, G> h(bench::order::room_knobs{fill, chain, seed % 2 == 0});
    std::mt19937 rng(seed);
    std::vector<block> live;
    for (int op = 0; op < 200000; ++op) {
        if (live.empty() || rng() % 8 < 5) {
            const std::size_t n = rng() % 16 == 0 ? 300 + rng() % 2000 : 1 + rng() % 256;
            const void* hint = !live.empty() && rng() % 2 ? live[rng() % live.size()].p : nullptr;
            auto* p = static_cast<unsigned char*>(h.allocate(allotheque::request{n, hint}));
            check(reinterpret_cast<std::uintptr_t>(p) % 8 == 0, "8-byte alignment");
            const auto tag = static_cast<unsigned char>(rng());
            std::memset(p, tag, n);
            live.push_back({p, n, tag});
        } else {
            const std::size_t i = rng() % live.size();
            const block b = live[i];
            for (std::size_t k = 0; k < b.n; ++k)
                if (b.p[k] != b.tag) {
                    check(false, "block contents intact until freed");
                    break;
                }
            h.deallocate(b.p, allotheque::request{b.n});
            live[i] = live.back();
            live.pop_back();
        }
    }
    for (const block& b : live) {
        for (std::size_t k = 0; k < b.n; ++k)
            if (b.p[k] != b.tag) {
                check(false, "block contents intact at the end");
                break;
            }
        h.deallocate(b.p, allotheque::request{b.n});
    }
}

// A hinted class keeps room: after the first window of hinted requests, a
// group stops taking foreign blocks at the fill mark, and a hint into a group
// with a free slot lands in that group.
void placement() {
    using heap = bench::order::room_heap<allotheque::velox_heap<>, 4096>;
    heap h(bench::order::room_knobs{25, 0, true});
    std::vector<void*> all;
    void* first = h.allocate(allotheque::request{40, nullptr});
    all.push_back(first);
    for (int i = 0; i < 1000; ++i) all.push_back(h.allocate(allotheque::request{40, all.back()}));
    // Foreign blocks now: they must not fill a group beyond 25 %. (Fewer than
    // 256 of them: after 256 to 384 unhinted requests in a row the class counts
    // as unhinted and fills its groups again.)
    std::vector<void*> foreign;
    for (int i = 0; i < 200; ++i) foreign.push_back(h.allocate(allotheque::request{40, nullptr}));
    std::size_t per_page_max = 0;
    for (void* f : foreign) {
        std::size_t same = 0;
        for (void* g : foreign) same += (reinterpret_cast<std::uintptr_t>(f) >> 12) == (reinterpret_cast<std::uintptr_t>(g) >> 12);
        per_page_max = std::max(per_page_max, same);
    }
    check(per_page_max <= 4096 / 40 / 4 + 1, "foreign blocks stop at the fill mark of a group");
    // A hint into a foreign block's group (it has room) is honoured.
    for (int i = 0; i < 100; ++i) {
        void* near = h.allocate(allotheque::request{40, foreign[static_cast<std::size_t>(i)]});
        check((reinterpret_cast<std::uintptr_t>(near) >> 12) == (reinterpret_cast<std::uintptr_t>(foreign[static_cast<std::size_t>(i)]) >> 12),
              "a hint into a group with room lands in it");
        all.push_back(near);
    }
    // An unhinted class fills its groups completely: 1024 blocks of 64 bytes
    // take 16 groups of 64 slots (the first group may start partly used).
    std::vector<void*> plain;
    for (int i = 0; i < 1024; ++i) plain.push_back(h.allocate(allotheque::request{64, nullptr}));
    std::vector<std::uintptr_t> pages;
    for (void* p : plain) pages.push_back(reinterpret_cast<std::uintptr_t>(p) >> 12);
    std::sort(pages.begin(), pages.end());
    pages.erase(std::unique(pages.begin(), pages.end()), pages.end());
    check(pages.size() <= 17, "a class without hints fills its groups");
    for (void* p : all) h.deallocate(p, allotheque::request{40});
    for (void* p : foreign) h.deallocate(p, allotheque::request{40});
    for (void* p : plain) h.deallocate(p, allotheque::request{64});
}

} // namespace

int main() {
    for (std::uint32_t seed = 1; seed <= 4; ++seed) {
        model_run<4096>(seed * 20, seed % 3, seed);
        model_run<1024>(100 / seed, 0, seed + 10);
        model_run<256>(50, seed % 2, seed + 20);
    }
    placement();
    if (failures) {
        std::fprintf(stderr, "room_heap: %d check(s) failed\n", failures);
        return 1;
    }
    std::puts("room_heap: all checks passed");
    return 0;
}
