// block_heap (boundary tags, splitting, coalescing): lea_heap, lea_deferred_heap
// and kingsley_coalescing_heap over the tracking source. good_size and
// usable_size, alignment, zero and huge sizes, large blocks, splitting and
// coalescing observed through the addresses and the source's byte count,
// deferred coalescing, deallocate_all and destruction returning every byte, a
// refusing source, a double free aborting (in a forked child), and a
// model-based test of 1,000,000 random operations per heap (half of the frees
// malloc-style, without a size).
// ALLOTHEQUE_MODEL_OPS overrides the number of model operations per heap.
#include "catch.hpp"
#include "model_support.hpp"
#include "in_child.hpp"
#include "tracking_source.hpp"

#include <allotheque/allocators/kingsley_coalescing.hpp>
#include <allotheque/allocators/lea.hpp>
#include <allotheque/block_heap.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <new>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace al = allotheque;
using allotheque_test::source_ledger;
using allotheque_test::tracking_source;

namespace {

using lea = al::lea_heap<tracking_source>;
using lea_deferred = al::lea_deferred_heap<tracking_source>;
using kingsley_coalescing = al::kingsley_coalescing_heap<tracking_source>;

std::uintptr_t addr(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

// A span of its own (documented in block_heap.hpp): alignment is served inside the spans.
bool is_large(std::size_t n, std::size_t) { return n > 64 * 1024; }

void fill(void* p, std::size_t n, std::uint64_t seed) {
    auto* b = static_cast<unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<unsigned char>(seed * 31 + i);
}
bool check(const void* p, std::size_t n, std::uint64_t seed) {
    auto* b = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i)
        if (b[i] != static_cast<unsigned char>(seed * 31 + i)) return false;
    return true;
}

using allotheque_test::in_child;

// Allocates blocks of n bytes until the (limited) source refuses; returns them.
template <class H>
std::vector<void*> exhaust(H& h, std::size_t n) {
    std::vector<void*> v;
    while (void* p = h.try_allocate(al::request{n})) v.push_back(p);
    return v;
}

// Among blocks allocated in a row, `count` that are adjacent (each starting
// where the previous one's block ends); their index in v, or v.size().
std::size_t adjacent_run(const std::vector<void*>& v, std::size_t block, std::size_t count) {
    for (std::size_t i = 0; i + count <= v.size(); ++i) {
        bool ok = true;
        for (std::size_t k = 1; k < count && ok; ++k) ok = addr(v[i + k]) == addr(v[i]) + k * block;
        if (ok) return i;
    }
    return v.size();
}

} // namespace

#define BLOCK_HEAPS lea, lea_deferred, kingsley_coalescing

TEMPLATE_TEST_CASE("block_heap: good_size and usable_size cover the request", "[block_heap]", BLOCK_HEAPS) {
    using H = TestType;
    source_ledger ledger;
    {
        H h{tracking_source(ledger)};
        std::mt19937_64 rng(1);
        std::vector<std::size_t> ns;
        for (std::size_t n = 0; n <= 3000; ++n) ns.push_back(n);
        for (int i = 0; i < 300; ++i) ns.push_back(rng() % 200000);
        for (std::size_t n : {std::size_t{64 * 1024 - 1}, std::size_t{64 * 1024}, std::size_t{64 * 1024 + 1}})
            ns.push_back(n);
        std::vector<void*> live;
        for (std::size_t n : ns) {
            const std::size_t g = H::good_size(n);
            REQUIRE(g >= n);
            REQUIRE(g % 8 == 0);
            REQUIRE(H::good_size(n, 16) == g);   // 16 is the natural alignment
            void* p = h.allocate(al::request{n});
            REQUIRE(p != nullptr);
            REQUIRE(addr(p) % 16 == 0);
            const std::size_t u = H::usable_size(p);
            REQUIRE(u >= g);
            // Every usable byte is writable (ASan checks), once opened: past
            // the size asked for a memory checker keeps the block shut.
            al::detail::poison::expose(p, u);
            std::memset(p, 0xab, u);
            live.push_back(p);
            if (live.size() > 64) {
                h.deallocate(live.front());
                live.erase(live.begin());
            }
        }
        for (void* p : live) h.deallocate(p);
        // Refused requests.
        CHECK(H::good_size(1, 3) == 0);
        CHECK(H::good_size(1, H::max_large_alignment * 2) == 0);
        CHECK(H::good_size(1, 8192) >= 1);   // beyond a page: a large block
        CHECK(H::good_size(std::numeric_limits<std::size_t>::max()) == 0);
        CHECK(H::good_size(H::max_size + 1) == 0);
    }
    CHECK(ledger.balanced());
}

TEMPLATE_TEST_CASE("block_heap: alignment", "[block_heap]", BLOCK_HEAPS) {
    using H = TestType;
    source_ledger ledger;
    {
        H h{tracking_source(ledger)};
        std::vector<std::pair<void*, std::size_t>> live;
        for (std::size_t n : {0u, 1u, 8u, 15u, 16u, 17u, 100u, 1000u, 5000u, 70000u}) {
            for (std::size_t a : {0u, 1u, 2u, 4u, 8u, 16u, 32u, 64u, 4096u}) {
                void* p = h.allocate(al::request{n, nullptr, a});
                REQUIRE(addr(p) % std::max<std::size_t>(a, 16) == 0);
                REQUIRE(H::usable_size(p) >= n);
                REQUIRE(H::usable_size(p) >= H::good_size(n, a));
                al::detail::poison::expose(p, H::usable_size(p));   // past the request: shut under a checker
                std::memset(p, 0x5a, H::usable_size(p));
                live.emplace_back(p, a);
            }
        }
        // Beyond a page: served as a large block, aligned, returned to the source on free.
        for (std::size_t a : {std::size_t{8192}, std::size_t{1} << 20, std::size_t{1} << 22}) {
            void* p = h.allocate(al::request{16, nullptr, a});
            REQUIRE(addr(p) % a == 0);
            CHECK(H::usable_size(p) >= 16);
            std::memset(p, 0x33, 16);
            live.emplace_back(p, a);
        }
        // Not a power of two, or beyond max_large_alignment: refused.
        for (std::size_t a : {std::size_t{3}, std::size_t{24}, std::size_t{48}, std::size_t{100}, std::size_t{4095},
                              H::max_large_alignment * 2}) {
            CHECK(h.try_allocate(al::request{16, nullptr, a}) == nullptr);
            CHECK_THROWS_AS((void)h.allocate(al::request{16, nullptr, a}), std::bad_alloc);
            CHECK(H::good_size(16, a) == 0);
        }
        // Sized and unsized deallocation both work.
        bool sized = false;
        for (auto [p, a] : live) {
            if ((sized = !sized)) h.deallocate(p, al::request{0, nullptr, a});
            else h.deallocate(p);
        }
        CHECK(h.stats().large_blocks == 0u);
    }
    CHECK(ledger.balanced());
}

TEMPLATE_TEST_CASE("block_heap: size 0 gives unique blocks", "[block_heap]", BLOCK_HEAPS) {
    using H = TestType;
    source_ledger ledger;
    {
        H h{tracking_source(ledger)};
        std::set<void*> seen;
        std::vector<void*> v;
        for (int i = 0; i < 1000; ++i) {
            void* p = h.allocate(al::request{0});
            REQUIRE(p != nullptr);
            REQUIRE(seen.insert(p).second);
            REQUIRE(H::usable_size(p) >= 1);
            v.push_back(p);
        }
        std::sort(v.begin(), v.end());
        for (std::size_t i = 1; i < v.size(); ++i) REQUIRE(addr(v[i - 1]) + H::usable_size(v[i - 1]) <= addr(v[i]));
        for (void* p : v) h.deallocate(p);
    }
    CHECK(ledger.balanced());
}

TEMPLATE_TEST_CASE("block_heap: huge sizes are refused and the heap still works", "[block_heap]", BLOCK_HEAPS) {
    using H = TestType;
    source_ledger ledger;
    {
        H h{tracking_source(ledger)};
        void* keep = h.allocate(al::request{100});
        fill(keep, 100, 7);
        for (std::size_t n : {std::numeric_limits<std::size_t>::max(), std::numeric_limits<std::size_t>::max() - 15,
                              H::max_size + 1, H::max_size, std::size_t{1} << 50}) {
            for (std::size_t a : {0u, 64u}) {
                CHECK(h.try_allocate(al::request{n, nullptr, a}) == nullptr);
                CHECK_THROWS_AS((void)h.allocate(al::request{n, nullptr, a}), std::bad_alloc);
            }
        }
        CHECK(h.stats().os_bytes == ledger.bytes);
        CHECK(h.stats().large_blocks == 0u);
        void* p = h.allocate(al::request{200});
        fill(p, 200, 8);
        CHECK(check(keep, 100, 7));
        CHECK(check(p, 200, 8));
        h.deallocate(p);
        h.deallocate(keep);
    }
    CHECK(ledger.balanced());
}

TEMPLATE_TEST_CASE("block_heap: large blocks round-trip", "[block_heap]", BLOCK_HEAPS) {
    using H = TestType;
    source_ledger ledger;
    {
        H h{tracking_source(ledger)};
        std::vector<std::pair<void*, std::size_t>> v;
        std::size_t seed = 0;
        for (std::size_t n : {64u * 1024 + 1, 65u * 1024, 100u * 1024, 1u << 20, (1u << 20) + 12345, 5u << 20}) {
            void* p = h.allocate(al::request{n});
            REQUIRE(addr(p) % 16 == 0);
            REQUIRE(H::usable_size(p) >= n);
            REQUIRE(H::good_size(n) >= n);
            fill(p, n, ++seed);
            v.emplace_back(p, n);
        }
        CHECK(h.stats().large_blocks == v.size());
        CHECK(h.stats().os_bytes == ledger.bytes);
        // Each a span of its own; a freed one goes to the back end's cache of
        // free pages (up to retain_bytes, 4 MiB by default), beyond which pages
        // go back to the source.
        const std::size_t before = ledger.bytes;
        seed = 0;
        for (auto [p, n] : v) CHECK(check(p, n, ++seed));
        h.deallocate(v[1].first);   // unsized
        CHECK(ledger.bytes <= before);
        CHECK(h.stats().free_bytes >= v[1].second);
        CHECK(h.stats().large_blocks == v.size() - 1);
        h.deallocate(v[2].first, al::request{v[2].second});   // sized
        CHECK(h.stats().large_blocks == v.size() - 2);
        h.deallocate(v[0].first);
        h.deallocate(v[3].first);
        h.deallocate(v[4].first);
        // The last one is left to the destructor.
        CHECK(h.stats().large_blocks == 1u);
    }
    CHECK(ledger.balanced());
}

// try_resize(p, n) finds p's span itself; try_resize(p, span, n) takes the
// one a caller found (the malloc's realloc): random growths and shrinks of
// live blocks, by either form, against the contents each block must keep.
TEMPLATE_TEST_CASE("block_heap: try_resize in place, by pointer or by span", "[block_heap]", BLOCK_HEAPS) {
    using H = TestType;
    source_ledger ledger;
    {
        H h{tracking_source(ledger)};
        std::mt19937_64 rng(77);
        struct live { void* p; std::size_t n; std::uint64_t seed; };
        std::vector<live> v;
        std::uint64_t seed = 0;
        std::size_t grown = 0, refused = 0;
        const auto size = [&rng] {
            return (rng() % 8 == 0) ? 64 * 1024 + rng() % (1 << 20) : 1 + rng() % 3000;
        };
        for (int step = 0; step < 4000; ++step) {
            const unsigned op = rng() % 4;
            if (op == 0 || v.empty()) {
                const std::size_t n = size();
                void* p = h.allocate(al::request{n});
                REQUIRE(p);
                fill(p, n, ++seed);
                v.push_back({p, n, seed});
            } else if (op == 1) {
                const std::size_t i = rng() % v.size();
                CHECK(check(v[i].p, v[i].n, v[i].seed));
                h.deallocate(v[i].p);
                v[i] = v.back();
                v.pop_back();
            } else {
                live& b = v[rng() % v.size()];
                const std::size_t n = size();
                const bool ok = op == 2 ? h.try_resize(b.p, n) : h.try_resize(b.p, H::span_of_block(b.p), n);
                CHECK(check(b.p, std::min(b.n, n), b.seed));
                if (ok) {
                    ++grown;
                    CHECK(H::usable_size(b.p) >= n);
                    b.n = n;
                    fill(b.p, n, b.seed = ++seed);
                } else {
                    ++refused;
                }
            }
        }
        CHECK(grown > 100);
        CHECK(refused > 100);
        for (const live& b : v) CHECK(check(b.p, b.n, b.seed));
    }
    CHECK(ledger.balanced());
}

// A block grown in place step by step (a buffer under realloc) eats the free
// block after it; what is left must stay a free block of the right size in
// the index, whether its bin changed or not (the index moves its entry where
// the bin is the same). Checked against a heap that allocated the final size
// at once: both then serve the same number of 512-byte blocks, all past the
// grown block, before they ask the source for more.
TEMPLATE_TEST_CASE("block_heap: growth in place leaves the rest of the free block after it serving",
                   "[block_heap]", BLOCK_HEAPS) {
    using H = TestType;
    const auto fill_rest = [](H& h, source_ledger& ledger, const void* grown) {
        const std::size_t sources = ledger.allocations;
        std::size_t served = 0;
        std::vector<void*> v;
        for (;;) {
            void* q = h.allocate(al::request{512});
            REQUIRE(q);
            v.push_back(q);
            if (ledger.allocations != sources) break;
            CHECK(addr(q) > addr(grown));
            ++served;
        }
        for (void* q : v) h.deallocate(q);
        return served;
    };
    std::mt19937_64 rng(4099);
    std::size_t n = 16;
    std::uint64_t seed = 1;
    source_ledger grown_ledger, direct_ledger;
    {
        H grown{tracking_source(grown_ledger)};
        void* p = grown.allocate(al::request{n});
        REQUIRE(p);
        fill(p, n, seed);
        while (n < 24000) {   // Kingsley rounds to powers of two: 32 KiB fits its span
            const std::size_t m = n + 16 + rng() % 241;
            INFO("growing " << n << " -> " << m);
            REQUIRE(grown.try_resize(p, m));
            REQUIRE(check(p, n, seed));
            CHECK(H::usable_size(p) >= m);
            fill(p, n = m, ++seed);
        }
        H direct{tracking_source(direct_ledger)};
        void* d = direct.allocate(al::request{n});
        REQUIRE(d);
        CHECK(H::usable_size(p) == H::usable_size(d));
        const std::size_t served = fill_rest(grown, grown_ledger, p);
        CHECK(served > 20);
        CHECK(served == fill_rest(direct, direct_ledger, d));
        CHECK(check(p, n, seed));
        grown.deallocate(p);
        direct.deallocate(d);
    }
    CHECK(grown_ledger.balanced());
    CHECK(direct_ledger.balanced());
}

TEMPLATE_TEST_CASE("block_heap: one free block is split for many small requests", "[block_heap]", BLOCK_HEAPS) {
    using H = TestType;
    source_ledger ledger;
    {
        H h{tracking_source(ledger)};
        std::vector<void*> v;
        for (int i = 0; i < 1000; ++i) v.push_back(h.allocate(al::request{24}));
        // One span from the source holds them all (the other allocation is the
        // slab of span records) ...
        CHECK(ledger.allocations == 2u);
        CHECK(h.stats().os_bytes == 64u * 1024 + h.stats().metadata_bytes);
        // ... cut one after the other from the same free block.
        const std::size_t block = H::usable_size(v[0]) + 8;
        for (std::size_t i = 1; i < v.size(); ++i) REQUIRE(addr(v[i]) == addr(v[i - 1]) + block);
        CHECK(block == 32u);
        for (void* p : v) h.deallocate(p);
        // All merged back: a block as big as the whole span but its tags is served
        // without a second span.
        if constexpr (!std::is_same_v<H, lea_deferred>) {   // (deferred: see its own test)
            void* big = h.allocate(al::request{32 * 1024 - 8});
            CHECK(ledger.allocations == 2u);
            CHECK(addr(big) == addr(v[0]));
            h.deallocate(big);
        }
    }
    CHECK(ledger.balanced());
}

TEMPLATE_TEST_CASE("block_heap: a run of adjacent free blocks is merged", "[block_heap]", BLOCK_HEAPS) {
    using H = TestType;
    source_ledger ledger;
    ledger.limit = 64 * 1024 + allotheque_test::record_slab;   // one span: beyond it the source refuses
    {
        H h{tracking_source(ledger)};
        // Fill the span with 512-byte blocks (504 + the head word) until the
        // source refuses: no free block of 512 bytes is left anywhere.
        std::vector<void*> v = exhaust(h, 504);
        REQUIRE(v.size() > 100);
        CHECK_THROWS_AS((void)h.allocate(al::request{504}), std::bad_alloc);
        const std::size_t bytes = ledger.bytes, allocations = ledger.allocations, refusals = ledger.refusals;
        const std::size_t i = adjacent_run(v, 512, 8);
        REQUIRE(i < v.size());
        // Free the 8 in a scrambled order (each merges with either side) ...
        for (std::size_t k : {3u, 1u, 6u, 0u, 7u, 2u, 5u, 4u}) {
            if (k % 2) h.deallocate(v[i + k]);
            else h.deallocate(v[i + k], al::request{504});
        }
        // ... and 4096 - 8 bytes are served from them without the source.
        void* p = h.try_allocate(al::request{8 * 512 - 8});
        REQUIRE(p != nullptr);
        CHECK(addr(p) == addr(v[i]));
        CHECK(ledger.bytes == bytes);
        CHECK(ledger.allocations == allocations);
        CHECK(ledger.refusals == refusals);   // never even asked
        al::detail::poison::expose(p, H::usable_size(p));   // past the request: shut under a checker
        std::memset(p, 0x11, H::usable_size(p));
        // Splitting the merged block again: 8 blocks of 512 in the same place.
        h.deallocate(p);
        for (std::size_t k = 0; k < 8; ++k) {
            void* q = h.try_allocate(al::request{504});
            REQUIRE(q != nullptr);
            CHECK(addr(q) >= addr(v[i]));
            CHECK(addr(q) < addr(v[i]) + 8 * 512);
        }
        CHECK(h.try_allocate(al::request{504}) == nullptr);
        CHECK(ledger.bytes == bytes);
    }
    CHECK(ledger.balanced());
}

TEST_CASE("block_heap: immediate coalescing merges at once", "[block_heap]") {
    source_ledger ledger;
    {
        lea h{tracking_source(ledger)};
        void* a = h.allocate(al::request{200});   // 208-byte blocks
        void* b = h.allocate(al::request{200});
        void* guard = h.allocate(al::request{200});
        REQUIRE(addr(b) == addr(a) + 208);
        h.deallocate(a);
        h.deallocate(b);
        void* ab = h.allocate(al::request{2 * 208 - 8});
        CHECK(ab == a);
        h.deallocate(ab);
        h.deallocate(guard);
    }
    CHECK(ledger.balanced());
}

// Two adjacent blocks of n bytes (`block` bytes each), freed, wait: a
// request for both is served elsewhere, and each is taken back by its size,
// last freed first (the second by `smaller`, which takes the same block
// size). Returns the blocks still held, for the caller to free.
template <class H>
std::vector<void*> wait_and_serve_again(H& h, std::size_t n, std::size_t smaller, std::size_t block) {
    void* a = h.allocate(al::request{n});
    void* b = h.allocate(al::request{n});
    void* guard = h.allocate(al::request{n});
    REQUIRE(addr(b) == addr(a) + block);
    h.deallocate(a);
    h.deallocate(b);
    // Not merged: a request for both is served elsewhere ...
    void* ab = h.allocate(al::request{2 * block - 8});
    CHECK(ab != a);
    // ... and the waiting blocks serve their size again, last freed first.
    CHECK(h.allocate(al::request{n}) == b);
    CHECK(h.allocate(al::request{smaller}) == a);
    return {a, b, ab, guard};
}

TEST_CASE("block_heap: deferred coalescing", "[block_heap]") {
    using H = lea_deferred;
    SECTION("freed blocks wait and serve the same size again") {
        source_ledger ledger;
        {
            H h{tracking_source(ledger)};
            // 193..200 bytes all take 208-byte blocks.
            for (void* x : wait_and_serve_again(h, 200, 193, 208)) h.deallocate(x);
        }
        CHECK(ledger.balanced());
    }
    SECTION("an aligned request takes a parked block of its size only if it has the alignment") {
        source_ledger ledger;
        {
            H h{tracking_source(ledger)};
            // Freed and asked again: the same block, at a pop's cost.
            void* a = h.allocate(al::request{48, nullptr, 64});
            REQUIRE(addr(a) % 64 == 0);
            std::memset(a, 0x5a, 48);
            h.deallocate(a);
            void* b = h.allocate(al::request{48, nullptr, 64});
            CHECK(b == a);
            h.deallocate(b);
            // A parked block of the size off the alignment is left where it is.
            // (64-byte blocks between 32-byte ones: their payloads' residues mod 64 differ.)
            std::vector<void*> v, between;
            for (int i = 0; i < 8; ++i) {
                v.push_back(h.allocate(al::request{48}));
                between.push_back(h.allocate(al::request{24}));
            }
            const auto off = std::find_if(v.begin(), v.end(), [](void* x) { return addr(x) % 64 != 0; });
            REQUIRE(off != v.end());
            void* misaligned = *off;
            h.deallocate(misaligned);
            void* c = h.allocate(al::request{48, nullptr, 64});
            CHECK(addr(c) % 64 == 0);
            CHECK(c != misaligned);
            std::memset(c, 0x33, 48);
            CHECK(h.allocate(al::request{48}) == misaligned);   // still parked, served unaligned
            h.deallocate(c);
            for (void* x : v) h.deallocate(x);
            for (void* x : between) h.deallocate(x);
        }
        CHECK(ledger.balanced());
    }
    SECTION("blocks up to 1 KiB wait; a larger one merges at once") {
        source_ledger ledger;
        {
            H h{tracking_source(ledger)};
            // 993..1,000 bytes: blocks of 1,008, the largest waiting size below 1,024.
            std::vector<void*> held = wait_and_serve_again(h, 1000, 993, 1008);
            // 1,100 bytes: blocks of 1,120, above the lists: freed, they merge.
            void* c = h.allocate(al::request{1100});
            void* d = h.allocate(al::request{1100});
            void* guard2 = h.allocate(al::request{1100});
            REQUIRE(addr(d) == addr(c) + 1120);
            h.deallocate(c);
            h.deallocate(d);
            void* cd = h.allocate(al::request{2 * 1120 - 8});
            CHECK(cd == c);
            for (void* x : held) h.deallocate(x);
            for (void* x : {cd, guard2}) h.deallocate(x);
        }
        CHECK(ledger.balanced());
    }
    SECTION("a waiting block taken back inline is zeroed when asked; aligned requests keep their path") {
        source_ledger ledger;
        {
            H h{tracking_source(ledger)};
            auto* a = static_cast<unsigned char*>(h.allocate(al::request{200}));
            void* guard = h.allocate(al::request{200});
            std::memset(a, 0xab, 200);
            h.deallocate(a);
            auto* z = static_cast<unsigned char*>(h.allocate(al::request{200, nullptr, 0, true}));
            REQUIRE(z == a);
            CHECK(std::count(z, z + 200, 0) == 200);
            h.deallocate(z);
            // The waiting block serves an aligned request when its payload
            // has the alignment (16, the heap's own: always), and only then.
            for (const std::size_t align : {std::size_t{16}, std::size_t{256}}) {
                void* p = h.allocate(al::request{200, nullptr, align});
                CHECK(addr(p) % align == 0);
                CHECK((addr(a) % align == 0) == (p == a));
                h.deallocate(p);
            }
            // A size whose block size would wrap to the smallest block's is
            // refused, not served from that block's waiting list.
            void* small = h.allocate(al::request{8});
            h.deallocate(small);
            for (const std::size_t huge : {SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 8})
                CHECK(h.try_allocate(al::request{huge}) == nullptr);
            CHECK(h.allocate(al::request{8}) == small);
            h.deallocate(small);
            h.deallocate(guard);
        }
        CHECK(ledger.balanced());
    }
    SECTION("waiting blocks are merged before the source is asked for more") {
        source_ledger ledger;
        ledger.limit = 64 * 1024 + allotheque_test::record_slab;
        {
            H h{tracking_source(ledger)};
            std::vector<void*> v = exhaust(h, 200);   // 208-byte blocks (they wait when freed)
            REQUIRE(v.size() > 200);
            const std::size_t bytes = ledger.bytes, allocations = ledger.allocations, refusals = ledger.refusals;
            const std::size_t i = adjacent_run(v, 208, 8);
            REQUIRE(i < v.size());
            for (std::size_t k : {5u, 0u, 2u, 7u, 1u, 4u, 6u, 3u}) h.deallocate(v[i + k]);
            // Too big for any waiting list and for any free block: the heap
            // coalesces the waiting ones (instead of asking the source).
            void* p = h.try_allocate(al::request{8 * 208 - 8});
            REQUIRE(p != nullptr);
            CHECK(addr(p) == addr(v[i]));
            CHECK(ledger.bytes == bytes);
            CHECK(ledger.allocations == allocations);
            CHECK(ledger.refusals == refusals);
            al::detail::poison::expose(p, H::usable_size(p));   // past the request: shut under a checker
            std::memset(p, 0x22, H::usable_size(p));
            h.deallocate(p);
        }
        CHECK(ledger.balanced());
    }
    SECTION("every 256 frees the waiting blocks are merged") {
        source_ledger ledger;
        ledger.limit = 64 * 1024 + allotheque_test::record_slab;
        {
            H h{tracking_source(ledger)};
            std::vector<void*> v = exhaust(h, 100);   // 112-byte blocks
            REQUIRE(v.size() > 300);
            const std::size_t i = adjacent_run(v, 112, 256);
            REQUIRE(i < v.size());
            for (std::size_t k = 0; k < 256; ++k) h.deallocate(v[i + k]);
            // The 256th free merged them: one block of 256 * 112 bytes. (The
            // source cannot help: limit reached.)
            const std::size_t refusals = ledger.refusals;
            void* p = h.try_allocate(al::request{256 * 112 - 8});
            CHECK(ledger.refusals == refusals);
            REQUIRE(p != nullptr);
            CHECK(addr(p) == addr(v[i]));
            // A waiting block is not reused for the run any more.
            CHECK(h.try_allocate(al::request{100}) == nullptr);
            h.deallocate(p);
        }
        CHECK(ledger.balanced());
    }
}

TEMPLATE_TEST_CASE("block_heap: deallocate_all and destruction return every byte", "[block_heap]", BLOCK_HEAPS) {
    using H = TestType;
    source_ledger ledger;
    {
        H h{tracking_source(ledger)};
        std::mt19937_64 rng(3);
        for (int round = 0; round < 3; ++round) {
            std::vector<void*> v;
            for (int i = 0; i < 5000; ++i) {
                const std::size_t n = rng() % 50 == 0 ? 70000 + rng() % 100000 : 1 + rng() % 2000;
                const std::size_t a = rng() % 10 == 0 ? 64 : 0;
                v.push_back(h.allocate(al::request{n, nullptr, a}));
                if (rng() % 3 == 0) {   // free some: the heap has free, waiting and live blocks
                    const std::size_t k = rng() % v.size();
                    h.deallocate(v[k]);
                    v[k] = v.back();
                    v.pop_back();
                }
            }
            CHECK(ledger.bytes > 0u);
            CHECK(h.stats().os_bytes == ledger.bytes);
            CHECK(h.stats().peak_os_bytes >= ledger.bytes);
            h.deallocate_all();
            CHECK(ledger.bytes == 0u);
            CHECK(ledger.live.empty());
            CHECK(h.stats().os_bytes == 0u);
            CHECK(h.stats().large_blocks == 0u);
            CHECK(h.last_allocation() == nullptr);
            // Usable again at once.
            void* p = h.allocate(al::request{100});
            // These partitions read no address: the heap keeps no "previous" for hints.
            CHECK(h.last_allocation() == nullptr);
            std::memset(p, 1, 100);
        }
        // The rest is left to the destructor.
        void* big = h.allocate(al::request{1 << 20});
        std::memset(big, 2, 1 << 20);
    }
    CHECK(ledger.balanced());
    CHECK(ledger.bad_deallocations == 0u);
}

TEMPLATE_TEST_CASE("block_heap: a refusing source", "[block_heap]", BLOCK_HEAPS) {
    using H = TestType;
    source_ledger ledger;
    {
        ledger.limit = 0;
        H h{tracking_source(ledger)};
        CHECK(h.try_allocate(al::request{16}) == nullptr);
        CHECK_THROWS_AS((void)h.allocate(al::request{16}), std::bad_alloc);
        CHECK_THROWS_AS((void)h.allocate(al::request{100000}), std::bad_alloc);
        CHECK_THROWS_AS((void)h.allocate(al::request{16, nullptr, 64}), std::bad_alloc);
        CHECK(ledger.refusals > 0u);
        CHECK(ledger.bytes == 0u);
        CHECK(h.stats().os_bytes == 0u);
        // Enough for one span of small blocks and nothing else.
        ledger.limit = 64 * 1024 + allotheque_test::record_slab;
        std::vector<void*> v = exhaust(h, 1000);
        CHECK(v.size() > 50);
        CHECK(ledger.bytes == 64u * 1024 + allotheque_test::record_slab);
        CHECK_THROWS_AS((void)h.allocate(al::request{1000}), std::bad_alloc);
        CHECK_THROWS_AS((void)h.allocate(al::request{100000}), std::bad_alloc);
        CHECK(h.stats().os_bytes == ledger.bytes);
        // Recovery: the source gives again.
        ledger.limit = std::numeric_limits<std::size_t>::max();
        void* p = h.allocate(al::request{1000});
        void* q = h.allocate(al::request{100000});
        std::memset(p, 3, 1000);
        std::memset(q, 4, 100000);
        h.deallocate(q);
        for (void* x : v) h.deallocate(x);
        // p is left to the destructor.
    }
    CHECK(ledger.balanced());
    CHECK(ledger.bad_deallocations == 0u);
}

// A block's second free. Freed blocks merge with their neighbours; each way a
// freed block can end up (alone, absorbed into the free block before it,
// absorbing the one after it, merged from the deferred lists) must abort.
TEMPLATE_TEST_CASE("block_heap: a double free aborts", "[block_heap]", BLOCK_HEAPS) {
    using H = TestType;
    const std::size_t n = 2000;   // above the deferred lists' 1 KiB: merged at once
    auto expect_abort = [](auto f) {
        const auto [aborted, err] = in_child(f);
        CHECK(aborted);
        CHECK(err.find("allotheque::block_heap: double free") != std::string::npos);
    };
    SECTION("alone") {
        expect_abort([&] {
            H h;
            void* a = h.allocate(al::request{n});
            void* guard = h.allocate(al::request{n});
            (void)guard;
            h.deallocate(a);
            h.deallocate(a);
        });
    }
    SECTION("absorbed into the free block before it") {
        expect_abort([&] {
            H h;
            void* a = h.allocate(al::request{n});
            void* b = h.allocate(al::request{n});
            void* guard = h.allocate(al::request{n});
            (void)guard;
            h.deallocate(a);
            h.deallocate(b);   // merges into a
            h.deallocate(b);
        });
    }
    SECTION("absorbing the free block after it") {
        expect_abort([&] {
            H h;
            void* a = h.allocate(al::request{n});
            void* b = h.allocate(al::request{n});
            void* guard = h.allocate(al::request{n});
            (void)guard;
            h.deallocate(b);
            h.deallocate(a);   // absorbs b
            h.deallocate(a);
        });
    }
    SECTION("sized deallocation too") {
        expect_abort([&] {
            H h;
            void* a = h.allocate(al::request{n});
            void* b = h.allocate(al::request{n});
            h.deallocate(a, al::request{n});
            h.deallocate(b, al::request{n});
            h.deallocate(b, al::request{n});
        });
    }
    if constexpr (std::is_same_v<H, lea_deferred>) {
        SECTION("a small block after the batch was merged") {
            expect_abort([&] {
                H h;
                std::vector<void*> v;
                for (int i = 0; i < 300; ++i) v.push_back(h.allocate(al::request{24}));
                // Freed last to first: the batch (last in, first out) merges v[0]
                // first, then v[1] into it, and so on; the 256th free merges all.
                for (std::size_t i = 256; i-- > 0;) h.deallocate(v[i]);
                h.deallocate(v[100]);
            });
        }
    }
    // Not an abort: a correct program in the child exits normally.
    SECTION("control: no double free, no abort") {
        const auto [aborted, err] = in_child([&] {
            H h;
            void* a = h.allocate(al::request{n});
            void* b = h.allocate(al::request{n});
            h.deallocate(a);
            h.deallocate(b);
        });
        CHECK_FALSE(aborted);
        CHECK(err.empty());
    }
}

// ---------------------------------------------------------------------------
// Model-based test.


namespace {

using allotheque_test::model_ops;

struct live_block {
    std::byte* p;
    std::size_t n, align, usable;
    std::uint64_t id;
};

// Fills every usable byte (usable_size is a multiple of 8 and p 16-aligned).
void fill_block(const live_block& b) { allotheque_test::fill_pattern(b.p, b.usable, b.id); }
bool intact(const live_block& b) { return allotheque_test::pattern_intact(b.p, b.usable, b.id); }

template <class H>
class model {
public:
    model(H& h, std::uint64_t seed) : h_(h), rng_(seed) {}

    void allocate_one() {
        const std::size_t n = pick_size();
        const std::size_t a = pick_alignment();
        const void* hint = rng_() % 4 == 0 && !blocks_.empty() ? blocks_[rng_() % blocks_.size()].p : nullptr;
        const std::size_t good = H::good_size(n, a);
        MODEL_REQUIRE(good >= n && good % 8 == 0, "n " << n << " a " << a << " good " << good);
        auto* p = static_cast<std::byte*>(h_.allocate(al::request{n, hint, a}));
        MODEL_REQUIRE(p != nullptr, "n " << n);
        MODEL_REQUIRE(h_.last_allocation() == nullptr, "these partitions read no address: no previous kept");
        const auto x = addr(p);
        MODEL_REQUIRE(x % 16 == 0, x);
        if (a != 0) MODEL_REQUIRE(x % a == 0, "block " << x << " alignment " << a);
        const std::size_t usable = H::usable_size(p);
        MODEL_REQUIRE(usable >= good && usable % 8 == 0, "n " << n << " good " << good << " usable " << usable);
        // No overlap with the neighbours (over the whole usable extent).
        auto next = by_addr_.lower_bound(x);
        if (next != by_addr_.end())
            MODEL_REQUIRE(next->first >= x + usable, "new block [" << x << ", +" << usable
                                                                    << ") overlaps the next live block at "
                                                                    << next->first);
        if (next != by_addr_.begin()) {
            const live_block& prev = blocks_[std::prev(next)->second];
            MODEL_REQUIRE(std::prev(next)->first + prev.usable <= x,
                          "new block at " << x << " overlaps the previous live block [" << std::prev(next)->first
                                          << ", +" << prev.usable << ")");
        }
        live_block b{p, n, a, usable, next_id_++};
        fill_block(b);
        by_addr_.emplace(x, blocks_.size());
        blocks_.push_back(b);
        ++allocations_;
        if (is_large(n, a)) ++large_;
    }

    void free_one() { free_at(rng_() % blocks_.size()); }

    void free_at(std::size_t i) {
        const live_block b = blocks_[i];
        MODEL_REQUIRE(intact(b), "block id " << b.id << " size " << b.n << " align " << b.align << " corrupted");
        MODEL_REQUIRE(H::usable_size(b.p) == b.usable, "usable_size changed while live");
        by_addr_.erase(addr(b.p));
        if (i + 1 != blocks_.size()) {
            blocks_[i] = blocks_.back();
            by_addr_[addr(blocks_[i].p)] = i;
        }
        blocks_.pop_back();
        if (rng_() % 2) {
            h_.deallocate(b.p);   // malloc-style: no size
            ++unsized_;
        } else {
            h_.deallocate(b.p, al::request{b.n, nullptr, b.align});
        }
        ++deallocations_;
    }

    void verify_sample(std::size_t count) {
        for (std::size_t k = 0; k < count && !blocks_.empty(); ++k) {
            const live_block& b = blocks_[rng_() % blocks_.size()];
            MODEL_REQUIRE(intact(b), "live block id " << b.id << " corrupted");
        }
    }

    void verify_all() {
        std::uintptr_t end = 0;
        for (auto [x, i] : by_addr_) {
            const live_block& b = blocks_[i];
            MODEL_REQUIRE(x >= end, "overlap at " << x);
            end = x + b.usable;
            MODEL_REQUIRE(intact(b), "live block id " << b.id << " corrupted");
        }
        REQUIRE(by_addr_.size() == blocks_.size());
    }

    void free_all() {
        while (!blocks_.empty()) free_at(blocks_.size() - 1);
    }

    void run(std::size_t ops) {
        for (std::size_t op = 0; op < ops; ++op) {
            // Phases of growth and shrinkage: free blocks pile up, then merge.
            const unsigned phase = static_cast<unsigned>(op / 10'000) % 4;
            const unsigned alloc_percent = phase == 0 ? 60 : phase == 2 ? 40 : 50;
            if (blocks_.empty() || rng_() % 100 < alloc_percent) allocate_one();
            else free_one();
            if (op % 5'000 == 0) verify_sample(50);
            if (op == ops / 2) {   // empty the heap once: everything merges back
                verify_all();
                free_all();
            }
            max_live_ = std::max(max_live_, blocks_.size());
        }
        verify_all();
    }

    std::size_t live() const { return blocks_.size(); }
    std::size_t max_live() const { return max_live_; }
    std::size_t allocations() const { return allocations_; }
    std::size_t deallocations() const { return deallocations_; }
    std::size_t unsized() const { return unsized_; }
    std::size_t large() const { return large_; }

private:
    // 1..512 mostly; a 3 % tail up to 100 KiB (any size: block heaps split and
    // merge, so distinct sizes leave no classes behind), a few zeros.
    std::size_t pick_size() {
        const unsigned r = static_cast<unsigned>(rng_() % 1000);
        if (r < 2) return 0;
        if (r < 970) return 1 + rng_() % 512;
        return 513 + rng_() % (100 * 1024 - 512);
    }
    // 0 or 16: from the partition; 64: mapped on its own (one in ten).
    std::size_t pick_alignment() {
        static constexpr std::size_t as[] = {0, 0, 0, 0, 0, 16, 16, 16, 16, 64};
        return as[rng_() % std::size(as)];
    }

    H& h_;
    std::mt19937_64 rng_;
    std::vector<live_block> blocks_;
    std::map<std::uintptr_t, std::size_t> by_addr_;
    std::uint64_t next_id_ = 1;
    std::size_t max_live_ = 0, allocations_ = 0, deallocations_ = 0, unsized_ = 0, large_ = 0;
};

template <class H>
void run_model(const char* name, std::uint64_t seed) {
    const std::size_t ops = model_ops();
    source_ledger ledger;
    const auto t0 = std::chrono::steady_clock::now();
    {
        auto h = std::make_unique<H>(tracking_source(ledger));
        model<H> m(*h, seed);
        m.run(ops);
        CHECK(m.allocations() + m.deallocations() >= ops);
        CHECK(h->stats().os_bytes == ledger.bytes);
        if (ops >= 100'000) {
            CHECK(m.large() > 0u);
            CHECK(m.max_live() > 1000u);
            CHECK(m.unsized() > m.deallocations() / 3);
        }
        // Free half, leave the rest to the destructor.
        for (std::size_t k = m.live() / 2; k > 0; --k) m.free_one();
        m.verify_all();
        INFO(name << ": " << m.allocations() << " allocations, max live " << m.max_live() << ", peak from source "
                  << ledger.peak << " bytes");
        CHECK(ledger.bad_deallocations == 0u);
    }
    CHECK(ledger.bytes == 0u);
    CHECK(ledger.allocations == ledger.deallocations);
    CHECK(ledger.balanced());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    WARN(name << ": " << ops << " operations in " << s << " s, peak " << ledger.peak / 1024 << " KiB from the source");
}

} // namespace

TEST_CASE("block_heap model: lea_heap", "[block_heap][model]") { run_model<lea>("lea", 201); }
TEST_CASE("block_heap model: lea_deferred_heap", "[block_heap][model]") { run_model<lea_deferred>("lea_deferred", 202); }
TEST_CASE("block_heap model: kingsley_coalescing_heap", "[block_heap][model]") {
    run_model<kingsley_coalescing>("kingsley_coalescing", 203);
}
