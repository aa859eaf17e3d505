// Declaring heaps as the documentation spells them (issue 34, items 4-9; the
// declarations that must not compile are in tests/compile_fail/):
//   - heap_config{.free_marks = true} alone, at the default granularity, on
//     every exact-size heap of the library: sizes stay consistent between
//     allocate and deallocate, and a double free aborts;
//   - the best-fit tree of sizes, simultaneous<adjacency<>, rb_tree<block_size,
//     ..., best_fit>>, as a block_heap: best fit observed, and a model test
//     (random allocate / free against a map of the live blocks, every block's
//     contents checked) that makes merges take tree hosts out, and rb_tree's
//     remove path by path on chunks fed by hand;
//   - request_with built from a request and values, and with(...).
// ALLOTHEQUE_MODEL_OPS overrides the number of model operations.
#include "catch.hpp"
#include "in_child.hpp"
#include "model_support.hpp"
#include "tracking_source.hpp"

#include <allotheque/allotheque.hpp>
#include <allotheque/malloc/declaration.hpp>
#include <allotheque/malloc/malloc_heap.hpp>
#include <allotheque/malloc/shipped.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace al = allotheque;
using allotheque_test::in_child;
using allotheque_test::source_ledger;
using allotheque_test::tracking_source;

namespace {

std::uintptr_t addr(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

// ---- item 4: free marks -----------------------------------------------------

using marked = al::configured<al::heap_config{.free_marks = true}>;
using marked_kingsley = al::kingsley_heap<al::arena_source, marked>;
using marked_quickfit = al::quickfit_heap<al::arena_source, marked>;
using marked_segregated = al::segregated_heap<al::arena_source, marked>;
using marked_velox = al::velox_heap<al::arena_source, marked>;
using marked_medius = al::medius_heap<al::arena_source, marked>;
using marked_defero = al::defero_heap<al::arena_source, marked>;
// The smallest chunks docs/api.md names for heap_config::free_marks.
static_assert(marked_kingsley::min_chunk == 16 && al::kingsley_heap<>::min_chunk == 8);
static_assert(marked_quickfit::min_chunk == 16 && al::quickfit_heap<>::min_chunk == 8);
static_assert(marked_velox::min_chunk == 32 && al::velox_heap<>::min_chunk == 24);
static_assert(marked_medius::min_chunk == 32 && al::medius_heap<>::min_chunk == 24);
static_assert(marked_defero::min_chunk == 48 && al::defero_heap<>::min_chunk == 40);

} // namespace

#define MARKED_HEAPS marked_kingsley, marked_quickfit, marked_segregated, marked_velox, marked_medius, marked_defero

TEMPLATE_TEST_CASE("free_marks at the default granularity: sizes agree, double frees abort", "[heap][bad_input]",
                   MARKED_HEAPS) {
    using H = TestType;
    static_assert(H::granularity == 8);
    static_assert(H::min_chunk >= H::marks::offset + 8, "the smallest chunk holds the mark");
    static_assert(H::min_chunk % H::granularity == 0);
    STATIC_REQUIRE(H::good_size(0) >= H::min_chunk);

    // Every size up to past a page: allocate picks good_size, a sized free puts
    // the chunk where the next allocation of that size looks (usable_size is
    // the chunk size recorded when the span was cut: it must be good_size).
    H h;
    std::mt19937_64 rng(34);
    std::vector<std::pair<void*, std::size_t>> live;
    std::uint64_t id = 1;
    std::map<void*, std::uint64_t> ids;
    for (std::size_t n = 0; n <= 5000; n += 1 + n / 64) {
        for (int k = 0; k < 3; ++k) {
            void* p = h.allocate(al::request{n});
            REQUIRE(h.usable_size(p) == H::good_size(n));
            REQUIRE(H::good_size(n) >= n);
            allotheque_test::fill_pattern(p, H::good_size(n) / 8 * 8, id);
            ids[p] = id++;
            live.emplace_back(p, n);
        }
        // Free some, sized or not, and check the survivors.
        while (live.size() > 20) {
            const std::size_t i = rng() % live.size();
            auto [p, m] = live[i];
            live[i] = live.back();
            live.pop_back();
            REQUIRE(allotheque_test::pattern_intact(p, H::good_size(m) / 8 * 8, ids[p]));
            ids.erase(p);
            if (rng() % 2) h.deallocate(p, al::request{m});
            else h.deallocate(p);
        }
    }
    for (auto [p, m] : live) {
        REQUIRE(allotheque_test::pattern_intact(p, H::good_size(m) / 8 * 8, ids[p]));
        h.deallocate(p, al::request{m});
    }

    // The smallest chunk, freed twice: the second free aborts with a message.
    const auto [aborted, err] = in_child([] {
        H child;
        void* p = child.allocate(al::request{1});
        child.deallocate(p, al::request{1});
        child.deallocate(p, al::request{1});
    });
    CHECK(aborted);
    CHECK(err.find("double free") != std::string::npos);
}

// ---- item 6: the best-fit tree of sizes ---------------------------------------

namespace {

using best_fit_tree =
    al::simultaneous<al::adjacency<>, al::rb_tree<al::block_size, al::list<al::block_size, void, al::first_fit,
                                                                           al::doubly_linked>,
                                                  al::best_fit>>;
using tree_heap = al::block_heap<best_fit_tree, tracking_source>;
static_assert(requires(best_fit_tree::header_type& h, std::byte* p) { best_fit_tree::deallocate(h, p); });

} // namespace

TEST_CASE("best-fit tree of sizes: the smallest free block that fits serves", "[block_heap][rb_tree]") {
    source_ledger ledger;
    {
        tree_heap h{tracking_source(ledger)};
        // Free blocks of 1000, 200 and 500 bytes, each between two live ones
        // so that none merges.
        void* fence0 = h.allocate(al::request{64});
        void* a = h.allocate(al::request{1000});
        void* fence1 = h.allocate(al::request{64});
        void* c = h.allocate(al::request{200});
        void* fence2 = h.allocate(al::request{64});
        void* e = h.allocate(al::request{500});
        void* fence3 = h.allocate(al::request{64});
        h.deallocate(a);
        h.deallocate(c);
        h.deallocate(e);
        CHECK(h.allocate(al::request{180}) == c);   // not a, the first in address order
        CHECK(h.allocate(al::request{480}) == e);
        CHECK(h.allocate(al::request{900}) == a);
        for (void* p : {a, c, e, fence0, fence1, fence2, fence3}) h.deallocate(p);
    }
    CHECK(ledger.bytes == 0u);
}

TEST_CASE("best-fit tree of sizes: a merge takes a class's host out", "[block_heap][rb_tree]") {
    source_ledger ledger;
    {
        tree_heap h{tracking_source(ledger)};
        // Ten same-size blocks (112-byte blocks), each followed by a live
        // neighbour; freed in order, the first becomes the host of the size's
        // class and the other nine its chunks.
        std::vector<void*> same, next;
        for (int i = 0; i < 10; ++i) {
            same.push_back(h.allocate(al::request{96}));
            next.push_back(h.allocate(al::request{96}));
        }
        void* tail = h.allocate(al::request{64});
        for (void* p : same) h.deallocate(p);
        // Freeing the host's right neighbour merges same[0], next[0] and
        // same[1] into one 336-byte block: the host and a chunk leave the
        // class, which must live on in another chunk with the other eight
        // findable.
        h.deallocate(next[0]);
        std::vector<void*> again;
        for (int i = 2; i < 10; ++i) again.push_back(h.allocate(al::request{96}));
        std::sort(again.begin(), again.end());
        CHECK(std::equal(again.begin(), again.end(), same.begin() + 2));
        void* merged = h.allocate(al::request{300});   // a 320-byte block: the merged three fit best
        CHECK(merged == same[0]);
        for (void* p : again) h.deallocate(p);
        for (std::size_t i = 1; i < next.size(); ++i) h.deallocate(next[i]);
        h.deallocate(merged);
        h.deallocate(tail);
    }
    CHECK(ledger.bytes == 0u);
    CHECK(ledger.balanced());
}

namespace {
template <class C>
concept can_remove = requires(typename C::header_type& h, std::byte* p, std::size_t n) { C::remove(h, p, n); };
} // namespace

TEST_CASE("rb_tree::remove: a chunk, a lone host, a host handing its node on, a class dissolved", "[rb_tree]") {
    // Chunks fed by hand to a tree of sizes whose classes are lists matched by
    // page: a removed host's node moves to a chunk of its own page, and with
    // none there the class is dissolved and its chunks go back in.
    using tree = al::rb_tree<al::size, al::list<al::page, void, al::match, al::doubly_linked>, al::best_fit>;
    static_assert(can_remove<tree>);
    // list<void> cannot remove a chunk, so neither can a tree over it; a tree
    // of addresses cannot, whatever it holds (its chunks have any size).
    static_assert(!can_remove<al::rb_tree<al::size, al::list<void>>>);
    static_assert(!can_remove<al::rb_tree<al::page, al::list<al::block_size, void, al::first_fit, al::doubly_linked>>>);
    static_assert(can_remove<al::rb_tree<al::block_size, al::list<al::page, void, al::match, al::doubly_linked>>>);
    alignas(4096) static std::byte mem[4 * 4096];
    std::byte* const c0 = mem;                   // page 0
    std::byte* const c1 = mem + 4096;            // page 1
    std::byte* const c2 = mem + 2 * 4096;        // page 2
    std::byte* const c3 = mem + 2 * 4096 + 64;   // page 2
    std::byte* const big = mem + 3 * 4096;       // page 3, a class of its own
    tree::header_type h;
    tree::init(h);
    auto take = [&](std::size_t n, const std::byte* hint) { return tree::allocate(h, al::request{n, hint}); };

    tree::deallocate(h, big, 128);
    tree::remove(h, big, 128);   // a host alone in its class: the class goes
    CHECK(take(128, big) == nullptr);

    // Freed in this order, c0 hosts the class and its list is c3, c2, c1.
    for (std::byte* c : {c0, c1, c2, c3}) tree::deallocate(h, c, 64);
    auto host = [&] { return h.classes.begin()->host(); };
    REQUIRE(host() == c0);
    tree::remove(h, c1, 64);   // not the host: it leaves the list
    // The host c0 goes and no chunk of the class is on its page: the class is
    // dissolved and c3, c2 come back, c3 the new host.
    tree::remove(h, c0, 64);
    REQUIRE(!tree::empty(h));
    CHECK(host() == c3);
    // The host c3 goes and hands its node to c2, on its page.
    tree::remove(h, c3, 64);
    REQUIRE(!tree::empty(h));
    CHECK(host() == c2);
    CHECK(take(64, c1) == nullptr);   // nothing left on page 1 (c1 was removed)
    CHECK(take(64, c0) == nullptr);   // nor on page 0
    CHECK(take(64, c2) == c2);
    CHECK(tree::empty(h));
}

namespace {

struct tree_block {
    std::byte* p;
    std::size_t n;
    std::uint64_t id;
};

} // namespace

TEST_CASE("best-fit tree of sizes: model", "[block_heap][rb_tree][model]") {
    const std::size_t ops = allotheque_test::model_ops() / 2;
    source_ledger ledger;
    {
        auto h = std::make_unique<tree_heap>(tracking_source(ledger));
        std::mt19937_64 rng(3406);
        std::vector<tree_block> live;
        std::map<std::uintptr_t, std::size_t> by_addr;   // address -> index in live
        std::uint64_t next_id = 1;
        std::size_t max_live = 0, large = 0;
        // A few sizes recur (so classes hold many chunks and hosts get merged
        // away), the rest spread up to 4 KiB, a tail is large.
        const std::size_t common[] = {24, 48, 96, 100, 256, 1000};
        auto pick_size = [&]() -> std::size_t {
            const unsigned r = static_cast<unsigned>(rng() % 1000);
            if (r < 400) return common[rng() % std::size(common)];
            if (r < 990) return 1 + rng() % 4096;
            return 64 * 1024 + rng() % (64 * 1024);
        };
        auto content_bytes = [](std::size_t n) { return std::min<std::size_t>(n, 4096) / 8 * 8; };
        auto free_at = [&](std::size_t i) {
            const tree_block b = live[i];
            MODEL_REQUIRE(allotheque_test::pattern_intact(b.p, content_bytes(b.n), b.id),
                          "block id " << b.id << " of " << b.n << " bytes corrupted");
            by_addr.erase(addr(b.p));
            if (i + 1 != live.size()) {
                live[i] = live.back();
                by_addr[addr(live[i].p)] = i;
            }
            live.pop_back();
            if (rng() % 2) h->deallocate(b.p);
            else h->deallocate(b.p, al::request{b.n});
        };
        for (std::size_t op = 0; op < ops; ++op) {
            const unsigned phase = static_cast<unsigned>(op / 20'000) % 3;
            const unsigned alloc_percent = phase == 0 ? 60 : phase == 1 ? 50 : 40;
            if (live.empty() || rng() % 100 < alloc_percent) {
                const std::size_t n = pick_size();
                const std::size_t a = rng() % 8 == 0 ? 64 : 0;
                auto* p = static_cast<std::byte*>(h->allocate(al::request{n, nullptr, a}));
                MODEL_REQUIRE(p != nullptr, "n " << n);
                MODEL_REQUIRE(addr(p) % (a ? a : 16) == 0, "alignment " << a);
                MODEL_REQUIRE(h->usable_size(p) >= n, "usable " << h->usable_size(p) << " < " << n);
                const std::uintptr_t x = addr(p);
                auto it = by_addr.lower_bound(x);
                if (it != by_addr.end()) MODEL_REQUIRE(x + n <= it->first, "overlaps the next block");
                if (it != by_addr.begin()) {
                    const tree_block& prev = live[std::prev(it)->second];
                    MODEL_REQUIRE(addr(prev.p) + prev.n <= x, "overlaps the previous block");
                }
                const tree_block b{p, n, next_id++};
                allotheque_test::fill_pattern(p, content_bytes(n), b.id);
                by_addr.emplace(x, live.size());
                live.push_back(b);
                large += n > 64 * 1024;
            } else {
                free_at(rng() % live.size());
            }
            max_live = std::max(max_live, live.size());
            if (op == ops / 2)
                while (!live.empty()) free_at(live.size() - 1);   // every class drains
        }
        for (const tree_block& b : live)
            MODEL_REQUIRE(allotheque_test::pattern_intact(b.p, content_bytes(b.n), b.id), "block id " << b.id);
        if (ops >= 100'000) {
            CHECK(max_live > 1000u);
            CHECK(large > 0u);
        }
        while (live.size() > max_live / 4) free_at(live.size() - 1);   // the rest go with the heap
        CHECK(ledger.bad_deallocations == 0u);
    }
    CHECK(ledger.bytes == 0u);
    CHECK(ledger.balanced());
}

// ---- item 7: request_with with values -----------------------------------------

namespace {
struct site {
    std::uint32_t line = 0;
};
struct weight {
    double w = 0;
};
} // namespace

TEST_CASE("request_with: built from a request and values, or by with(...)", "[request]") {
    const al::request_with<site> a{al::request{24, nullptr, 16}, site{7}};
    CHECK(a.size == 24u);
    CHECK(a.alignment == 16u);
    CHECK(a.get<site>().line == 7u);

    auto b = al::with(al::request{40}, site{9}, weight{0.5});
    static_assert(std::is_same_v<decltype(b), al::request_with<site, weight>>);
    CHECK(b.size == 40u);
    CHECK(b.get<site>().line == 9u);
    CHECK(b.get<weight>().w == 0.5);
    b.get<site>().line = 10;   // a request that is not const can be changed in place
    CHECK(b.get<site>().line == 10u);

    const site s{3};
    auto c = al::with(al::request{8}, s);   // an lvalue: the value is copied, not referenced
    static_assert(std::is_same_v<decltype(c), al::request_with<site>>);
    CHECK(c.get<site>().line == 3u);

    // The default form still works, and a plain request is not silently a request_with<>.
    al::request_with<site> d;
    d.size = 16;
    CHECK(d.get<site>().line == 0u);
    static_assert(!std::is_convertible_v<al::request, al::request_with<>>);
    static_assert(std::is_constructible_v<al::request_with<>, al::request>);

    // Heaps take it as any request (the exact heap's classified<R> copies it).
    al::segregated_heap<> exact;
    void* p = exact.allocate(al::with(al::request{64}, site{1}));
    CHECK(exact.usable_size(p) == 64u);
    exact.deallocate(p, al::with(al::request{64}, site{1}));
    al::lea_heap<> blocks;
    void* q = blocks.allocate(b);
    CHECK(blocks.usable_size(q) >= 40u);
    blocks.deallocate(q);
}

TEST_CASE("segregated_rounding: small requests to the segregated classes, large ones exact", "[malloc][declaration]") {
    // A declaration over a heap of exact sizes (Medius's list of sizes):
    // a program's many sizes become a few dozen, each reused by every
    // request that rounds to it; a large block is a span of its own.
    struct d : al::segregated_rounding<al::medius_heap<al::arena_source, al::malloc_options>> {};
    using H = d::heap;
    static_assert(std::is_same_v<H, al::medius_heap<al::arena_source, al::malloc_options>>);
    for (std::size_t n : {std::size_t{1}, std::size_t{17}, std::size_t{100}, std::size_t{129}, std::size_t{1000},
                          std::size_t{4097}, H::options::large_threshold}) {
        const std::size_t r = al::malloc_request_size<d>(n);
        REQUIRE(r == al::segregated_partition<>::round_size(n));
        REQUIRE(r >= n);
        REQUIRE(r - n <= std::max<std::size_t>(15, r / 4));
    }
    STATIC_REQUIRE(al::malloc_request_size<d>(100) == 112);
    STATIC_REQUIRE(al::malloc_request_size<d>(H::options::large_threshold + 1) == H::options::large_threshold + 1);
    STATIC_REQUIRE(al::malloc_request_size<d>(std::size_t{1} << 40) == std::size_t{1} << 40);
}

namespace {
struct hinted_decl {
    using heap = al::velox_heap<al::arena_source, al::malloc_options>;
    static constexpr const char* name = "hinted";
};
struct unhinted_decl : hinted_decl {
    static constexpr bool hint_previous_allocation = false;
};
} // namespace

TEST_CASE("hint_previous_allocation: the Velox and Medius libraries pass no hint", "[malloc][declaration]") {
    namespace d = al::malloc_declarations;
    STATIC_REQUIRE(al::malloc_hints_previous<d::segregated>);   // not locality-aware: the flag has no effect
    STATIC_REQUIRE_FALSE(al::malloc_hints_previous<d::velox>);
    STATIC_REQUIRE_FALSE(al::malloc_hints_previous<d::medius>);
    STATIC_REQUIRE(al::malloc_declaration<hinted_decl> && al::malloc_declaration<unhinted_decl>);
    STATIC_REQUIRE(al::malloc_hints_previous<hinted_decl>);
    STATIC_REQUIRE_FALSE(al::malloc_hints_previous<unhinted_decl>);
    // Nothing reads their heaps' previous allocation, so they do not record it
    // (a store less a malloc); a hinting declaration over such a heap is
    // refused (tests/compile_fail/malloc_hint_previous_forgotten.cpp).
    STATIC_REQUIRE(al::detail::forgets_last<d::velox::heap> && al::detail::forgets_last<d::medius::heap>);
    STATIC_REQUIRE_FALSE(al::detail::forgets_last<hinted_decl::heap>);
    STATIC_REQUIRE_FALSE(al::detail::forgets_last<d::segregated::heap>);   // reads no address: nothing to forget
}
