// layers::room (issue 14, item 3): placement that leaves room in a group for
// the blocks that will be hinted into it later.
//   * model runs: random hinted and unhinted allocations of every slot size,
//     sizes and alignments the parent serves, sized and unsized frees, each
//     live block's contents checked until it is freed;
//   * the placement rules: a hinted request lands in its hint's group (in the
//     hint's cache line when it has a free slot); foreign blocks stop at the
//     fill mark of a hinted size; a size nobody hints to fills its groups;
//   * groups go back when they empty; bad input gets its documented answer.
#include "catch.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <new>
#include <random>
#include <set>
#include <vector>

#include <allotheque/allocator.hpp>
#include <allotheque/allocators/velox.hpp>
#include <allotheque/layers/locked.hpp>
#include <allotheque/layers/room.hpp>
#include <allotheque/stl/hinted_map.hpp>

#include "in_child.hpp"
#include "model_support.hpp"
#include "tracking_source.hpp"

namespace al = allotheque;
using al::layers::room;
using al::layers::room_config;

namespace {

using room_velox = room<al::velox_heap<>>;
std::uintptr_t page_of(const void* p) { return reinterpret_cast<std::uintptr_t>(p) >> 12; }
std::uintptr_t line_of(const void* p) { return reinterpret_cast<std::uintptr_t>(p) >> 6; }

struct live_block {
    void* p;
    std::size_t n, a, usable;
    std::uint64_t id;
};

template <class H>
void model_run(std::uint32_t seed) {
    H h;
    std::mt19937_64 rng(seed);
    std::vector<live_block> live;
    std::set<std::uintptr_t> addresses;
    const std::size_t ops = std::min<std::size_t>(allotheque_test::model_ops(), 300'000);
    for (std::uint64_t id = 0; id < ops; ++id) {
        if (live.empty() || rng() % 8 < 5) {
            const std::size_t n = rng() % 16 == 0 ? 300 + rng() % 3000 : rng() % 257;
            const std::size_t a = rng() % 8 == 0 ? std::size_t{8} << rng() % 4 : 0;
            const void* hint = !live.empty() && rng() % 2 ? live[rng() % live.size()].p : nullptr;
            void* p = h.allocate(al::request{n, hint, a});
            MODEL_REQUIRE(p != nullptr, "allocate(" << n << ")");
            MODEL_REQUIRE(reinterpret_cast<std::uintptr_t>(p) % std::max<std::size_t>(a, 8) == 0, "alignment " << a);
            const std::size_t usable = h.good_size(n, a);
            MODEL_REQUIRE(usable >= n && h.usable_size(p) == usable, "usable size of " << n);
            MODEL_REQUIRE(addresses.insert(reinterpret_cast<std::uintptr_t>(p)).second, "a live block handed out again");
            allotheque_test::fill_pattern(p, usable & ~std::size_t{7}, id);
            live.push_back({p, n, a, usable, id});
        } else {
            const std::size_t i = rng() % live.size();
            const live_block b = live[i];
            MODEL_REQUIRE(allotheque_test::pattern_intact(b.p, b.usable & ~std::size_t{7}, b.id),
                          "block of " << b.n << " overwritten");
            if (rng() % 2) h.deallocate(b.p, al::request{b.n, nullptr, b.a});
            else h.deallocate(b.p);
            addresses.erase(reinterpret_cast<std::uintptr_t>(b.p));
            live[i] = live.back();
            live.pop_back();
        }
    }
    for (const live_block& b : live) {
        MODEL_REQUIRE(allotheque_test::pattern_intact(b.p, b.usable & ~std::size_t{7}, b.id), "block at the end");
        h.deallocate(b.p, al::request{b.n, nullptr, b.a});
    }
    // Every group but the open one of each size has gone back.
    CHECK(h.groups() <= H::slot_sizes);
}

} // namespace

TEST_CASE("room: model runs keep every live block intact", "[room][model]") {
    for (std::uint32_t seed = 1; seed <= 2; ++seed) {
        model_run<room_velox>(seed);
        model_run<room<al::velox_heap<>, room_config{.fill_percent = 50, .spread = false}>>(seed + 10);
        model_run<room<al::velox_heap<>, room_config{.hinted_percent = 0}>>(seed + 20);
        model_run<room<al::velox_heap<>, room_config{.group_bytes = 8192, .max_small = 512, .fill_percent = 10}>>(seed + 30);
    }
}

TEST_CASE("room: a hinted request lands beside its hint", "[room]") {
    room_velox h;
    void* first = h.allocate(al::request{24});
    void* second = h.allocate(al::request{24, first});
    CHECK(page_of(second) == page_of(first));
    CHECK(line_of(second) == line_of(first));   // the hint's line has free slots
    // Hints into a group with a free slot keep landing in it until it is full.
    std::vector<void*> chain{first, second};
    for (int i = 0; i < 100; ++i) chain.push_back(h.allocate(al::request{24, chain[static_cast<std::size_t>(i)]}));
    for (void* p : chain) CHECK(page_of(p) == page_of(first));
    // A hint into a block of another size, or outside any group, is foreign.
    const auto before = h.placement();
    void* other = h.allocate(al::request{40, first});
    int on_stack = 0;
    void* stack_hinted = h.allocate(al::request{40, &on_stack});
    CHECK(h.placement().hinted == before.hinted);
    CHECK(h.placement().foreign == before.foreign + 2);
    for (void* p : chain) h.deallocate(p, al::request{24});
    h.deallocate(other, al::request{40});
    h.deallocate(stack_hinted, al::request{40});
}

TEST_CASE("room: foreign blocks stop at the fill mark of a hinted size; an unhinted size fills its groups",
          "[room]") {
    room_velox h;   // fill 25 %
    std::vector<void*> hinted{h.allocate(al::request{40})};
    for (int i = 0; i < 1000; ++i) hinted.push_back(h.allocate(al::request{40, hinted.back()}));
    // Fewer than 256 foreign requests in a row: the size still counts as hinted.
    std::vector<void*> foreign;
    for (int i = 0; i < 200; ++i) foreign.push_back(h.allocate(al::request{40}));
    std::map<std::uintptr_t, std::size_t> per_page;
    for (void* p : foreign) ++per_page[page_of(p)];
    const std::size_t slots = (4096 - 64) / 40;
    for (const auto& [page, n] : per_page) CHECK(n <= slots / 4 + 1);
    // The room left is there for hints: each foreign block's group takes a block hinted to it.
    for (std::size_t i = 0; i < 100; ++i) {
        void* near = h.allocate(al::request{40, foreign[i]});
        CHECK(page_of(near) == page_of(foreign[i]));
        hinted.push_back(near);
    }
    // 64-byte blocks nobody hints to: 1024 of them fill 17 groups of 63 slots.
    std::vector<void*> plain;
    for (int i = 0; i < 1024; ++i) plain.push_back(h.allocate(al::request{64}));
    std::set<std::uintptr_t> pages;
    for (void* p : plain) pages.insert(page_of(p));
    CHECK(pages.size() <= 1024 / ((4096 - 64) / 64) + 2);
    for (void* p : hinted) h.deallocate(p);
    for (void* p : foreign) h.deallocate(p);
    for (void* p : plain) h.deallocate(p);
    CHECK(h.groups() <= 2);   // the open group of each size
}

TEST_CASE("room: emptied groups go back to the back end", "[room]") {
    room_velox h;
    std::vector<void*> v;
    for (int i = 0; i < 20000; ++i) v.push_back(h.allocate(al::request{48}));
    const std::size_t full = h.groups();
    CHECK(full >= 20000 / ((4096 - 64) / 48));
    const std::size_t os_full = h.stats().os_bytes;
    for (void* p : v) h.deallocate(p, al::request{48});
    CHECK(h.groups() == 1);
    h.trim();
    CHECK(h.stats().os_bytes < os_full);
}

TEST_CASE("room: bad input", "[room]") {
    room_velox h;
    SECTION("zero bytes: a distinct block of the smallest slot") {
        void* a = h.allocate(al::request{0});
        void* b = h.allocate(al::request{0});
        CHECK(a != b);
        CHECK(h.usable_size(a) == 16);
        h.deallocate(a, al::request{0});
        h.deallocate(b);
    }
    SECTION("sizes and alignments beyond a slot are the parent's") {
        CHECK(h.good_size(257) == al::velox_heap<>::good_size(257));
        void* p = h.allocate(al::request{100, nullptr, 4096});
        CHECK(reinterpret_cast<std::uintptr_t>(p) % 4096 == 0);
        CHECK_FALSE(h.placement().hinted + h.placement().foreign);
        h.deallocate(p, al::request{100, nullptr, 4096});
        CHECK_THROWS_AS(h.allocate(al::request{std::size_t{1} << 62}), std::bad_alloc);
        CHECK(h.try_allocate(al::request{std::size_t{1} << 62}) == nullptr);
        CHECK(h.try_allocate(al::request{16, nullptr, 2 * al::velox_heap<>::max_large_alignment}) == nullptr);
        CHECK(h.try_allocate(al::request{16, nullptr, 24}) == nullptr);   // not a power of two
    }
    SECTION("a double free or an interior pointer aborts with a message") {
        auto [aborted, err] = allotheque_test::in_child([] {
            room_velox c;
            void* p = c.allocate(al::request{32});
            c.deallocate(p, al::request{32});
            c.deallocate(p, al::request{32});
        });
        CHECK(aborted);
        CHECK(err.find("double free") != std::string::npos);
        auto [aborted2, err2] = allotheque_test::in_child([] {
            room_velox c;
            auto* p = static_cast<std::byte*>(c.allocate(al::request{32}));
            c.deallocate(p + 8);
        });
        CHECK(aborted2);
        CHECK(err2.find("not a block") != std::string::npos);
    }
}

TEST_CASE("room: a refusing source gives bad_alloc, and the layer recovers", "[room]") {
    using heap = room<al::velox_heap<allotheque_test::tracking_source>, room_config{}, allotheque_test::tracking_source>;
    auto& ledger = allotheque_test::default_ledger();
    {
        heap h;
        std::vector<void*> v;
        ledger.limit = ledger.bytes + 4 * allotheque_test::record_slab + 256 * 1024;
        bool refused = false;
        for (int i = 0; i < 100000 && !refused; ++i) {
            void* p = h.try_allocate(al::request{32});
            if (p) v.push_back(p);
            else refused = true;
        }
        CHECK(refused);
        CHECK_THROWS_AS(h.allocate(al::request{32}), std::bad_alloc);
        ledger.limit = std::numeric_limits<std::size_t>::max();
        void* p = h.allocate(al::request{32});
        CHECK(p != nullptr);
        v.push_back(p);
        for (void* q : v) h.deallocate(q, al::request{32});
    }
    CHECK(ledger.balanced());
}

TEST_CASE("room: under a lock, behind std and hinted containers", "[room][stl]") {
    using heap = al::layers::locked<room_velox>;
    static_assert(!al::layers::has_owner<room_velox>, "a group's blocks name no owner: no per_thread above room");
    static_assert(al::layers::heap<room_velox> && room_velox::locality_aware);
    heap h;
    std::map<int, int, std::less<>, al::allocator<std::pair<const int, int>, heap>> m{
        al::allocator<std::pair<const int, int>, heap>(h)};
    al::hinted_map<int, int, std::less<>, heap> hm(h);
    std::mt19937 rng(7);
    for (int i = 0; i < 20000; ++i) {
        const int k = static_cast<int>(rng() % 100000);
        m[k] = i;
        hm.insert_or_assign(k, i);
    }
    REQUIRE(m.size() == hm.size());
    auto it = hm.begin();
    for (const auto& [k, v] : m) {
        REQUIRE(it != hm.end());
        CHECK(it->first == k);
        CHECK(it->second == v);
        ++it;
    }
}
