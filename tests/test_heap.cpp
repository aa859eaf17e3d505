// Every heap (Kingsley, QuickFit, Velox, Medius, Defero): good_size rules,
// alignment, zero and huge sizes, large blocks, deallocate_all, returning every
// byte to the source on destruction, and a refusing source.
#include "catch.hpp"
#include "tracking_source.hpp"

#include <allotheque/allocators/defero.hpp>
#include <allotheque/allocators/kingsley.hpp>
#include <allotheque/allocators/medius.hpp>
#include <allotheque/allocators/quickfit.hpp>
#include <allotheque/allocators/velox.hpp>
#include <allotheque/heap.hpp>
#include <allotheque/malloc/shipped.hpp>
#include <allotheque/sources/counting_source.hpp>
#include <allotheque/sources/mmap_source.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <memory>
#include <new>
#include <random>
#include <set>
#include <utility>
#include <vector>

namespace al = allotheque;
using allotheque_test::source_ledger;
using allotheque_test::tracking_source;

namespace {

using kingsley = al::kingsley_heap<tracking_source>;
using quickfit = al::quickfit_heap<tracking_source>;
using velox = al::velox_heap<tracking_source>;
using medius = al::medius_heap<tracking_source>;
using defero = al::defero_heap<tracking_source>;

std::uintptr_t addr(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

// The tests claim the whole good_size block, which a memory checker keeps shut
// past the size asked for (detail/poison.hpp): opened first.
void fill(void* p, std::size_t n, std::uint64_t seed) {
    al::detail::poison::expose(p, n);
    auto* b = static_cast<unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<unsigned char>(seed * 31 + i);
}
bool check(const void* p, std::size_t n, std::uint64_t seed) {
    auto* b = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i)
        if (b[i] != static_cast<unsigned char>(seed * 31 + i)) return false;
    return true;
}

struct block {
    void* p;
    al::request r;
    std::size_t good;
};

// Allocates and writes; checks that blocks never overlap.
template <class H>
struct user {
    H& h;
    std::vector<block> live;
    void* get(std::size_t n, std::size_t a = 0, const void* hint = nullptr) {
        al::request r{n, hint, a};
        void* p = h.allocate(r);
        REQUIRE(p != nullptr);
        const std::size_t g = H::good_size(n, a);
        fill(p, g, live.size());
        live.push_back({p, r, g});
        return p;
    }
    void check_all() const {
        std::vector<std::pair<std::uintptr_t, std::size_t>> spans;
        for (std::size_t i = 0; i < live.size(); ++i) {
            REQUIRE(check(live[i].p, live[i].good, i));
            spans.emplace_back(addr(live[i].p), live[i].good);
        }
        std::sort(spans.begin(), spans.end());
        for (std::size_t i = 1; i < spans.size(); ++i) REQUIRE(spans[i - 1].first + spans[i - 1].second <= spans[i].first);
    }
    void release_all() {
        check_all();
        for (auto& b : live) h.deallocate(b.p, b.r);
        live.clear();
    }
};

} // namespace

#define ALL_HEAPS kingsley, quickfit, velox, medius, defero

TEMPLATE_TEST_CASE("heap: good_size rules", "[heap]", ALL_HEAPS) {
    using H = TestType;
    std::mt19937_64 rng(1);
    std::vector<std::size_t> ns;
    for (std::size_t n = 0; n <= 5000; ++n) ns.push_back(n);
    for (int i = 0; i < 2000; ++i) ns.push_back(rng() % 300000);
    for (std::size_t n : ns) {
        const std::size_t s = H::good_size(n);
        REQUIRE(s >= n);
        REQUIRE(s >= H::min_chunk);
        if (!H::is_large(s)) {
            REQUIRE(s % 8 == 0);
            REQUIRE(H::good_size(s) == s);   // a chunk size serves itself
            REQUIRE(H::good_size(n + 1) >= s);   // monotone
        } else {
            REQUIRE(s % 16 == 0);
            REQUIRE(s - n < 16);   // large requests are not rounded to classes
        }
        for (std::size_t a : {8u, 16u, 32u, 64u, 256u, 4096u}) {
            const std::size_t sa = H::good_size(n, a);
            REQUIRE(sa >= n);
            REQUIRE(sa % a == 0);
            REQUIRE(sa >= s);
            if (!H::is_large(sa)) REQUIRE(al::detail::natural_alignment(sa) >= a);
        }
    }
    // Refused requests are 0.
    CHECK(H::good_size(1, 3) == 0u);
    CHECK(H::good_size(1, 24) == 0u);
    CHECK(H::good_size(1, std::size_t{1} << 31) == 0u);   // beyond max_large_alignment
    CHECK(H::good_size(1, std::size_t{1} << 40) == 0u);
    // Alignment beyond a page makes a large block, aligned inside its span.
    CHECK(H::good_size(1, 8192) == 16u);
    CHECK(H::is_large(H::good_size(1, 8192), 8192));
    CHECK(H::good_size(H::max_size + 1) == 0u);
    CHECK(H::good_size(std::numeric_limits<std::size_t>::max()) == 0u);
    CHECK(H::good_size(std::numeric_limits<std::size_t>::max(), 16) == 0u);
    CHECK(H::good_size(H::max_size) != 0u);
    // The large threshold (64 KiB by default).
    CHECK(!H::is_large(H::good_size(64 * 1024)));
    CHECK(H::is_large(H::good_size(64 * 1024 + 1)));
    CHECK(H::good_size(64 * 1024 + 1) == 64 * 1024 + 16);
}

TEST_CASE("heap: good_size values of each allocator", "[heap]") {
    // Kingsley: powers of two.
    static_assert(kingsley::good_size(0) == 8 && kingsley::good_size(1) == 8 && kingsley::good_size(9) == 16);
    static_assert(kingsley::good_size(100) == 128 && kingsley::good_size(129) == 256);
    static_assert(kingsley::good_size(4097) == 8192 && kingsley::good_size(65536) == 65536);
    // QuickFit: multiples of 8 up to 128, powers of two above.
    static_assert(quickfit::good_size(1) == 8 && quickfit::good_size(41) == 48 && quickfit::good_size(100) == 104);
    static_assert(quickfit::good_size(128) == 128 && quickfit::good_size(129) == 256 && quickfit::good_size(200) == 256);
    // Velox, Medius: exact sizes in steps of 8 above the class node (24 bytes).
    static_assert(velox::min_chunk == 24 && medius::min_chunk == 24);
    static_assert(velox::good_size(1) == 24 && velox::good_size(25) == 32 && velox::good_size(129) == 136);
    static_assert(velox::good_size(4097) == 4104 && medius::good_size(200) == 200);
    // Defero: steps of 8 above its tree node (40 bytes).
    static_assert(defero::min_chunk == 40);
    static_assert(defero::good_size(1) == 40 && defero::good_size(41) == 48 && defero::good_size(129) == 136);
    // Alignment raises the size to a multiple of it.
    static_assert(velox::good_size(1, 64) == 64 && velox::good_size(100, 64) == 128 &&
                  velox::good_size(5000, 4096) == 8192 && kingsley::good_size(1, 4096) == 4096);
    SUCCEED();
}

TEMPLATE_TEST_CASE("heap: alignment", "[heap]", ALL_HEAPS) {
    using H = TestType;
    source_ledger ledger;
    {
        H h{tracking_source(ledger)};
        user<H> u{h, {}};
        for (std::size_t a : {0u, 8u, 16u, 64u, 4096u}) {
            for (std::size_t n : {0u, 1u, 24u, 100u, 1000u, 5000u, 70000u}) {
                for (int k = 0; k < 8; ++k) {
                    void* p = u.get(n, a);
                    if (a) REQUIRE(addr(p) % a == 0);
                    const std::size_t g = H::good_size(n, a);
                    REQUIRE(addr(p) % std::min<std::size_t>(al::detail::natural_alignment(g), 4096) == 0);
                    REQUIRE(addr(p) % 8 == 0);
                }
            }
        }
        u.check_all();
        // Beyond a page: a large block, aligned inside its span (up to 1 GiB).
        for (std::size_t a : {std::size_t{8192}, std::size_t{1} << 20}) {
            for (std::size_t n : {0u, 100u, 70000u}) {
                void* p = u.get(n, a);
                REQUIRE(addr(p) % a == 0);
                CHECK(h.usable_size(p) >= n);
            }
        }
        // Unsupported alignments: nullptr / bad_alloc, and the heap is fine.
        for (std::size_t a : std::initializer_list<std::size_t>{3, 24, 48, std::size_t{1} << 31, std::size_t{1} << 40}) {
            CHECK(h.try_allocate(al::request{16, nullptr, a}) == nullptr);
            CHECK_THROWS_AS((void)h.allocate(al::request{16, nullptr, a}), std::bad_alloc);
        }
        u.get(16);
        u.release_all();
    }
    CHECK(ledger.balanced());
}

TEMPLATE_TEST_CASE("heap: zero-size requests give unique non-null blocks", "[heap]", ALL_HEAPS) {
    using H = TestType;
    source_ledger ledger;
    {
        H h{tracking_source(ledger)};
        std::set<void*> seen;
        std::vector<void*> ps;
        for (int i = 0; i < 1000; ++i) {
            void* p = h.allocate(al::request{0, nullptr, 0});
            REQUIRE(p != nullptr);
            REQUIRE(seen.insert(p).second);
            // The block has good_size(0) usable bytes (opened: under a memory
            // checker only the 0 bytes asked for are).
            al::detail::poison::expose(p, H::good_size(0));
            std::memset(p, 0xab, H::good_size(0));
            ps.push_back(p);
        }
        for (void* p : ps) h.deallocate(p, al::request{0, nullptr, 0});
        h.deallocate(nullptr, al::request{0, nullptr, 0});   // no-op
        // Freed zero-size blocks are reused.
        void* again = h.allocate(al::request{0, nullptr, 0});
        CHECK(seen.count(again) == 1u);
        h.deallocate(again, al::request{0, nullptr, 0});
    }
    CHECK(ledger.balanced());
}

TEMPLATE_TEST_CASE("heap: huge requests throw bad_alloc and leave the heap usable", "[heap]", ALL_HEAPS) {
    using H = TestType;
    source_ledger ledger;
    {
        H h{tracking_source(ledger)};
        user<H> u{h, {}};
        u.get(64);
        const std::size_t huge[] = {std::numeric_limits<std::size_t>::max(), std::numeric_limits<std::size_t>::max() - 4095,
                                    H::max_size + 1, H::max_size};
        for (std::size_t n : huge) {
            CHECK(h.try_allocate(al::request{n, nullptr, 0}) == nullptr);
            CHECK_THROWS_AS((void)h.allocate(al::request{n, nullptr, 0}), std::bad_alloc);
            CHECK_THROWS_AS((void)h.allocate(al::request{n, nullptr, 64}), std::bad_alloc);
        }
        const std::size_t held = ledger.bytes;
        CHECK(h.stats().os_bytes == held);   // nothing taken for the failures
        u.get(64);
        u.get(100000);
        u.release_all();
    }
    CHECK(ledger.balanced());
}

TEMPLATE_TEST_CASE("heap: large blocks go to the source and come back", "[heap]", ALL_HEAPS) {
    using H = TestType;
    source_ledger ledger;
    {
        H h{tracking_source(ledger)};
        const std::size_t before = ledger.bytes;
        std::vector<std::pair<void*, std::size_t>> big;
        for (std::size_t n : {std::size_t{64 * 1024 + 1}, std::size_t{100000}, std::size_t{1} << 20,
                              (std::size_t{3} << 20) + 5}) {
            REQUIRE(H::is_large(H::good_size(n)));
            void* p = h.allocate(al::request{n, nullptr, 0});
            REQUIRE(p);
            CHECK(addr(p) % 4096 == 0);
            fill(p, H::good_size(n), n);
            big.emplace_back(p, n);
        }
        CHECK(h.stats().large_blocks == 4u);
        CHECK(ledger.bytes >= before + 64 * 1024 + 100000 + (1 << 20) + (3 << 20));
        for (auto [p, n] : big) REQUIRE(check(p, H::good_size(n), n));
        for (auto [p, n] : big) h.deallocate(p, al::request{n, nullptr, 0});
        CHECK(h.stats().large_blocks == 0u);
        // Freed large blocks stay in the back end's cache: resident up to four
        // times its budget (max(retain_bytes, peak / 8), 4 MiB here) at once,
        // down to the budget after purge_delay_ms.
        CHECK(h.stats().free_bytes <= 4 * (std::size_t{4} << 20));
        CHECK(h.stats().free_bytes >= std::size_t{1} << 20);
        CHECK(h.stats().os_bytes == ledger.bytes);
        // A block of a cached size is served from the cache, not the source.
        const std::size_t allocations = ledger.allocations;
        void* again = h.allocate(al::request{100000, nullptr, 0});
        CHECK(ledger.allocations == allocations);
        h.deallocate(again, al::request{100000, nullptr, 0});
        // With alignment.
        void* p = h.allocate(al::request{200000, nullptr, 4096});
        CHECK(addr(p) % 4096 == 0);
        h.deallocate(p, al::request{200000, nullptr, 4096});
        // trim() gives every free page back.
        h.trim();
        CHECK(ledger.bytes == before);
        CHECK(h.stats().os_bytes == 0u);
    }
    CHECK(ledger.balanced());
}

TEMPLATE_TEST_CASE("heap: deallocate_all returns everything and the heap is reusable", "[heap]", ALL_HEAPS) {
    using H = TestType;
    source_ledger ledger;
    {
        H h{tracking_source(ledger)};
        for (int round = 0; round < 3; ++round) {
            user<H> u{h, {}};
            std::mt19937 rng(static_cast<unsigned>(round));
            for (int i = 0; i < 3000; ++i) u.get(rng() % 600, 0, u.live.empty() ? nullptr : u.live.back().p);
            u.get(200000);
            u.check_all();
            CHECK(ledger.bytes > 0u);
            CHECK(h.stats().os_bytes == ledger.bytes);
            h.deallocate_all();
            CHECK(ledger.bytes == 0u);
            CHECK(ledger.live.empty());
            CHECK(h.stats().os_bytes == 0u);
            CHECK(h.stats().large_blocks == 0u);
            CHECK(h.last_allocation() == nullptr);
            u.live.clear();   // invalid now
        }
        user<H> u{h, {}};
        for (int i = 0; i < 500; ++i) u.get(static_cast<std::size_t>(i));
        u.check_all();
    }
    CHECK(ledger.balanced());
    CHECK(ledger.peak > 0u);
}

TEMPLATE_TEST_CASE("heap: destruction returns every byte (blocks still live)", "[heap]", ALL_HEAPS) {
    using H = TestType;
    source_ledger ledger;
    {
        H h{tracking_source(ledger)};
        user<H> u{h, {}};
        std::mt19937 rng(5);
        for (int i = 0; i < 20000; ++i) u.get(rng() % 2000);
        for (int i = 0; i < 5; ++i) u.get(70000 + rng() % 100000);
        // Free half, keep the rest live at destruction.
        for (std::size_t i = 0; i < u.live.size(); i += 2) h.deallocate(u.live[i].p, u.live[i].r);
        CHECK(ledger.allocations > 5u);
        CHECK(h.stats().peak_os_bytes == ledger.peak);
    }
    CHECK(ledger.bytes == 0u);
    CHECK(ledger.allocations == ledger.deallocations);
    CHECK(ledger.bad_deallocations == 0u);
    CHECK(ledger.balanced());
}

TEMPLATE_TEST_CASE("heap: counting_source<mmap_source> sees every byte", "[heap]", al::kingsley_heap<al::counting_source<al::mmap_source>>,
                   al::quickfit_heap<al::counting_source<al::mmap_source>>,
                   al::velox_heap<al::counting_source<al::mmap_source>>,
                   al::medius_heap<al::counting_source<al::mmap_source>>,
                   al::defero_heap<al::counting_source<al::mmap_source>>) {
    using H = TestType;
    H h;
    user<H> u{h, {}};
    for (int i = 0; i < 5000; ++i) u.get(static_cast<std::size_t>(i % 700));
    u.get(1 << 20);
    CHECK(h.source().bytes() == h.stats().os_bytes);
    CHECK(h.source().peak_bytes() == h.stats().peak_os_bytes);
    CHECK(h.source().allocations() > 0u);
    u.release_all();
    CHECK(h.stats().large_blocks == 0u);
    h.deallocate_all();
    CHECK(h.source().bytes() == 0u);
    CHECK(h.source().allocations() == h.source().deallocations());
}

TEMPLATE_TEST_CASE("heap: a refusing source gives bad_alloc, no leak, recovery", "[heap]", ALL_HEAPS) {
    using H = TestType;
    source_ledger ledger;
    ledger.limit = 64 * 1024 + allotheque_test::record_slab;   // one minimum growth (and the span records)
    {
        H h{tracking_source(ledger)};
        user<H> u{h, {}};
        // Chunks of 64 bytes exist after this (the rest of a refill span, which
        // the live block keeps from being reclaimed for other sizes).
        void* p64 = h.allocate(al::request{64, nullptr, 0});
        // Exhaust the source with 16-byte blocks.
        bool refused = false;
        for (int i = 0; i < 100000 && !refused; ++i) {
            void* p = h.try_allocate(al::request{16, nullptr, 0});
            if (!p) {
                refused = true;
                break;
            }
            fill(p, H::good_size(16), u.live.size());
            u.live.push_back({p, al::request{16, nullptr, 0}, H::good_size(16)});
        }
        REQUIRE(refused);
        CHECK(ledger.refusals > 0u);
        CHECK_THROWS_AS((void)h.allocate(al::request{16, nullptr, 0}), std::bad_alloc);
        CHECK_THROWS_AS((void)h.allocate(al::request{100000, nullptr, 0}), std::bad_alloc);   // large
        CHECK(ledger.bytes <= ledger.limit);
        CHECK(h.stats().os_bytes == ledger.bytes);
        u.check_all();
        // Sizes the heap still has chunks for are served.
        for (int i = 0; i < 10; ++i) u.get(64);
        // A freed block of the exhausted size is served again.
        block last = u.live.front();
        h.deallocate(last.p, last.r);
        u.live.erase(u.live.begin());
        void* again = h.allocate(al::request{16, nullptr, 0});
        CHECK(again == last.p);
        fill(again, H::good_size(16), 0);
        u.live.insert(u.live.begin(), {again, al::request{16, nullptr, 0}, H::good_size(16)});
        u.check_all();
        // The source accepts again: so does the heap.
        ledger.limit = std::numeric_limits<std::size_t>::max();
        for (int i = 0; i < 5000; ++i) u.get(16);
        u.get(100000);
        u.check_all();
        u.release_all();
        h.deallocate(p64, al::request{64, nullptr, 0});
    }
    CHECK(ledger.balanced());
}

TEMPLATE_TEST_CASE("heap: a source that refuses from the start", "[heap]", ALL_HEAPS) {
    using H = TestType;
    source_ledger ledger;
    ledger.limit = 0;
    {
        H h{tracking_source(ledger)};
        CHECK(h.try_allocate(al::request{8, nullptr, 0}) == nullptr);
        CHECK_THROWS_AS((void)h.allocate(al::request{8, nullptr, 0}), std::bad_alloc);
        CHECK_THROWS_AS((void)h.allocate(al::request{1 << 20, nullptr, 0}), std::bad_alloc);
        CHECK(h.stats().os_bytes == 0u);
        ledger.limit = std::numeric_limits<std::size_t>::max();
        void* p = h.allocate(al::request{8, nullptr, 0});
        CHECK(p != nullptr);
        h.deallocate(p, al::request{8, nullptr, 0});
    }
    CHECK(ledger.balanced());
}

// The malloc's fast path: a chunk the partition holds, or nullptr, and never
// a refill or a large block; what it hands out is what try_allocate would.
TEMPLATE_TEST_CASE("heap: try_allocate_cached serves only chunks the partition holds", "[heap]",
                   al::quickfit_heap<>, al::kingsley_heap<>, al::velox_heap<>, al::medius_heap<>) {
    TestType h;
    CHECK(h.try_allocate_cached(al::request{24}) == nullptr);   // nothing yet: no refill
    CHECK(h.stats().os_bytes == 0);
    std::vector<void*> blocks;
    for (int i = 0; i < 64; ++i) blocks.push_back(h.allocate(al::request{24}));
    for (void* p : blocks) h.deallocate(p, al::request{24});
    const std::size_t held = h.stats().os_bytes;
    std::vector<void*> again;
    for (int i = 0; i < 64; ++i) {
        void* p = h.try_allocate_cached(al::request{24});
        REQUIRE(p != nullptr);
        CHECK(h.stats().os_bytes == held);   // from the partition, never a refill
        std::memset(p, 0x5a, 24);
        again.push_back(p);
    }
    CHECK(std::set<void*>(again.begin(), again.end()).size() == again.size());
    CHECK(h.try_allocate_cached(al::request{100000}) == nullptr);            // large: the slow path's
    CHECK(h.try_allocate_cached(al::request{24, nullptr, 8192}) == nullptr);   // over-aligned: same
    for (void* p : again) h.deallocate(p, al::request{24});
}

// Velox' size tables keep each span's stack of its size in the span's record
// (hash_table::span_chunks), and a free that finds that stack empty pushes
// there and sets the size's bits without looking its class up
// (size_fronts::put_emptied). A sweep must then leave the class in place:
// here spans whose chunks are all live are swept past (trim()), then every
// chunk is freed onto its emptied stack, and allocations of the size must
// find every one of them again from the memory held (a span that also held
// dropped chunks still has those, so a few more may come first).
TEMPLATE_TEST_CASE("heap: frees onto span stacks after a sweep are found again", "[heap]",
                   al::heap<al::velox_classed_partition<>>, al::malloc_declarations::velox::heap) {
    auto h = std::make_unique<TestType>();
    constexpr int n = 8000;
    std::vector<void*> kept, dropped;
    for (int i = 0; i < n; ++i) (i < n / 2 ? kept : dropped).push_back(h->allocate(al::request{48}));
    for (void* p : dropped) h->deallocate(p, al::request{48});
    h->trim();   // the dropped half's spans go back; the kept half's spans hold no free chunk
    for (int round = 0; round < 2; ++round) {
        for (void* p : kept) h->deallocate(p, al::request{48});
        const std::size_t held = h->stats().os_bytes;
        std::set<void*> missing(kept.begin(), kept.end());
        std::vector<void*> again;
        while (!missing.empty() && again.size() < kept.size() + 1000) {
            void* p = h->allocate(al::request{48});
            std::memset(p, 0x5a, 48);
            missing.erase(p);
            again.push_back(p);
        }
        CHECK(missing.empty());
        CHECK(h->stats().os_bytes == held);
        CHECK(std::set<void*>(again.begin(), again.end()).size() == again.size());   // each handed out once
        for (void* p : again)
            if (std::find(kept.begin(), kept.end(), p) == kept.end()) h->deallocate(p, al::request{48});
        h->trim();   // a second sweep with every kept chunk live
    }
    for (void* p : kept) h->deallocate(p, al::request{48});
}

// The locality heaps keep their pop apart from their search: try_allocate_cached
// is the pop alone, and what it misses try_allocate_searched finds, both from
// the chunks the partition holds and never a refill (the malloc's miss runs
// that search before it takes remote frees back or refills).
static_assert(!al::quickfit_heap<>::searches_apart && !al::kingsley_heap<>::searches_apart);
TEMPLATE_TEST_CASE("heap: try_allocate_searched finds what the pop missed, never a refill", "[heap]",
                   al::velox_heap<>, al::medius_heap<>, al::heap<al::velox_classed_partition<>>,
                   al::heap<al::medius_classed_partition<>>) {
    static_assert(TestType::searches_apart);
    auto h = std::make_unique<TestType>();
    CHECK(h->try_allocate_searched(al::request{24}) == nullptr);   // nothing yet: no refill
    CHECK(h->stats().os_bytes == 0);
    // Over several 64 KiB vicinities (Velox) and many pages (Medius), a
    // second size between them, then everything freed in allocation order.
    constexpr int n = 6000;
    std::vector<void*> blocks, other;
    for (int i = 0; i < n; ++i) {
        blocks.push_back(h->allocate(al::request{24}));
        if (i % 64 == 0) other.push_back(h->allocate(al::request{200}));
    }
    for (void* p : blocks) h->deallocate(p, al::request{24});
    const std::size_t held = h->stats().os_bytes;
    std::set<void*> freed(blocks.begin(), blocks.end()), again;
    int popped = 0, searched = 0;
    for (;;) {
        void* p = h->try_allocate_cached(al::request{24});
        if (p) {
            ++popped;
        } else if ((p = h->try_allocate_searched(al::request{24}))) {
            ++searched;
        } else {
            break;
        }
        REQUIRE(again.insert(p).second);   // handed out once
        std::memset(p, 0x5a, 24);
        REQUIRE(h->stats().os_bytes == held);   // a chunk the partition held, never a refill
    }
    // Every chunk freed came back (and the last span's chunks never handed
    // out), then nullptr.
    CHECK(std::includes(again.begin(), again.end(), freed.begin(), freed.end()));
    CHECK(popped > 0);
    CHECK(searched > 0);                   // the pop alone missed some of them
    CHECK(h->try_allocate_searched(al::request{100000}) == nullptr);   // large: the slow path's
    for (void* p : again) h->deallocate(p, al::request{24});
    for (void* p : other) h->deallocate(p, al::request{200});
}
