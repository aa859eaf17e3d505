// The back end (backend/): range_set against a reference, the page map
// (failure leaves nothing behind, concurrent writers), the span pool (reuse,
// extend/shrink, the retention budget and trim), arena_source and sbrk_source
// (adjacency, reuse, no leak across heap lifetimes), and what the heaps build
// on it: reclaim policies, trim, large-block cache and in-place growth,
// memory freed as one size serving another, a refill whose page-map record
// fails, free marks, and a layer that overrides allocate.
#include "catch.hpp"
#include "in_child.hpp"
#include "tracking_source.hpp"

#include <allotheque/allocators/kingsley.hpp>
#include <allotheque/allocators/lea.hpp>
#include <allotheque/allocators/medius.hpp>
#include <allotheque/allocators/quickfit.hpp>
#include <allotheque/allocators/segregated.hpp>
#include <allotheque/allocators/velox.hpp>
#include <allotheque/backend/page_map.hpp>
#include <allotheque/backend/range_set.hpp>
#include <allotheque/backend/record_pool.hpp>
#include <allotheque/backend/span_pool.hpp>
#include <allotheque/detail/bad_alloc.hpp>
#include <allotheque/detail/remap.hpp>
#include <allotheque/layers/layer.hpp>
#include <allotheque/layers/locked.hpp>
#include <allotheque/sources/arena_source.hpp>
#include <allotheque/sources/counting_source.hpp>
#include <allotheque/sources/mmap_source.hpp>
#include <allotheque/sources/sbrk_source.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <random>
#include <thread>
#include <vector>

namespace al = allotheque;
namespace be = allotheque::backend;
using allotheque_test::exit_status_in_child;
using allotheque_test::in_child;
using allotheque_test::source_ledger;
using allotheque_test::tracking_source;

namespace {

constexpr std::size_t page = al::detail::page_size;
std::uintptr_t addr(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }
// Whether every page of [p, p+n) is mapped (mincore fails with ENOMEM where one is not).
bool mapped(void* p, std::size_t n) {
    std::vector<unsigned char> v((n + page - 1) / page);
    return ::mincore(p, n, v.data()) == 0;
}

// Options with every automatic reclaim immediate (interval 0) and nothing kept.
template <al::reclaim_policy R>
using prompt = al::configured<al::heap_config{.reclaim = R, .reclaim_interval_ms = 0, .retain_bytes = 0,
                                              .purge_delay_ms = 0}>;

// A fixed arena carved by hand, so range_set can be checked without a source.
struct carved {
    std::vector<be::span> records = std::vector<be::span>(40000);
    std::size_t next = 0;
    be::span* make(std::byte* base, std::size_t bytes, be::span* region = nullptr) {
        be::span* s = &records.at(next++);
        s->base = base;
        s->bytes = bytes;
        s->region = region;
        return s;
    }
};


// Maps each range in a gigabyte of its own, far from everything else.
struct far_source {
    static constexpr bool zeroed = true;
    void* allocate(std::size_t n, const void*) noexcept {
        // High in the address space, above ASan's shadow memory.
        static std::uintptr_t next = std::uintptr_t{0x5000} << 32;
        void* want = reinterpret_cast<void*>(next);
        next += std::size_t{1} << 30;
        void* p = ::mmap(want, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        return p == MAP_FAILED ? nullptr : p;
    }
    void deallocate(void* p, std::size_t n) noexcept { ::munmap(p, n); }
};

} // namespace

TEST_CASE("range_set: merging, best fit and removal against a reference", "[backend]") {
    carved c;
    auto* base = reinterpret_cast<std::byte*>(std::uintptr_t{1} << 40);   // never dereferenced
    be::range_set set;
    std::map<std::uintptr_t, std::size_t> ref;   // start -> length, merged
    auto ref_insert = [&](std::uintptr_t s, std::size_t n) {
        auto it = ref.lower_bound(s);
        if (it != ref.end() && it->first == s + n) {
            n += it->second;
            it = ref.erase(it);
        }
        if (it != ref.begin() && std::prev(it)->first + std::prev(it)->second == s) {
            auto prev = std::prev(it);
            prev->second += n;
        } else {
            ref.emplace(s, n);
        }
    };
    std::mt19937_64 rng(5);
    std::vector<std::pair<std::uintptr_t, std::size_t>> taken;
    // Start with one free range of 1024 pages; take and give back at random.
    set.insert(c.make(base, 1024 * page), [](be::span*) {});
    ref_insert(addr(base), 1024 * page);
    for (int op = 0; op < 20000; ++op) {
        if (taken.empty() || rng() % 2 == 0) {
            const std::size_t n = (1 + rng() % 8) * page;
            be::span* f = set.best_fit(n);
            // Best fit: the reference's smallest range >= n, lowest address among equals.
            std::uintptr_t best = 0;
            std::size_t best_len = ~std::size_t{0};
            for (auto [s, len] : ref)
                if (len >= n && len < best_len) {
                    best = s;
                    best_len = len;
                }
            if (!f) {
                REQUIRE(best_len == ~std::size_t{0});
                continue;
            }
            REQUIRE(addr(f->base) == best);
            REQUIRE(f->bytes == best_len);
            taken.emplace_back(addr(f->base), n);
            if (f->bytes == n) set.erase(f);
            else set.shrink_front(f, n);
            ref.erase(best);
            if (best_len > n) ref.emplace(best + n, best_len - n);
        } else {
            const std::size_t i = rng() % taken.size();
            auto [s, n] = taken[i];
            taken[i] = taken.back();
            taken.pop_back();
            set.insert(c.make(reinterpret_cast<std::byte*>(s), n), [](be::span*) {});
            ref_insert(s, n);
        }
        REQUIRE(set.count() == ref.size());
        if (op % 500 == 0) {
            std::size_t total = 0;
            for (auto [s, len] : ref) {
                total += len;
                be::span* r = set.starting_at(reinterpret_cast<std::byte*>(s));
                REQUIRE(r != nullptr);
                REQUIRE(r->bytes == len);
                REQUIRE(set.containing(reinterpret_cast<std::byte*>(s + len - 1)) == r);
            }
            REQUIRE(set.bytes() == total);
        }
    }
}

TEST_CASE("range_set: ranges of different regions never merge", "[backend]") {
    carved c;
    auto* base = reinterpret_cast<std::byte*>(std::uintptr_t{1} << 41);
    be::span* r1 = c.make(base, 4 * page);
    be::span* r2 = c.make(base + 4 * page, 4 * page);
    be::range_set set;
    set.insert(c.make(base, 4 * page, r1), [](be::span*) {});
    set.insert(c.make(base + 4 * page, 4 * page, r2), [](be::span*) {});
    CHECK(set.count() == 2u);
    CHECK(set.best_fit(8 * page) == nullptr);
}

TEST_CASE("record_pool: records are distinct, recycled first, and touch slab pages only as used", "[backend]") {
    using pool_t = be::record_pool<be::span>;
    al::mmap_source src;
    pool_t pool;
    be::span* first = pool.make(src);
    REQUIRE(first != nullptr);
    CHECK(pool.bytes() == pool_t::slab_bytes);
    // The slab is fresh anonymous memory: only the page holding the first
    // record has been written.
    auto* first_page = reinterpret_cast<std::byte*>(addr(first) & ~(page - 1));
    const std::size_t later_pages = pool_t::slab_bytes / page - 1;
    std::vector<unsigned char> resident(later_pages);
    REQUIRE(::mincore(first_page + page, later_pages * page, resident.data()) == 0);
    for (unsigned char r : resident) CHECK((r & 1) == 0);

    std::vector<be::span*> all{first};
    while (pool.bytes() == pool_t::slab_bytes) all.push_back(pool.make(src));
    CHECK(all.size() > pool_t::slab_bytes / sizeof(be::span) - 2);   // a slab holds what fits, less its header
    std::vector<std::uintptr_t> at;
    for (be::span* s : all) at.push_back(addr(s));
    std::sort(at.begin(), at.end());
    for (std::size_t i = 1; i < at.size(); ++i) CHECK(at[i] - at[i - 1] >= sizeof(be::span));
    CHECK(pool.live() == all.size());

    be::span* back = all[all.size() / 2];
    pool.recycle(back);
    CHECK(pool.make(src) == back);   // a recycled record before a fresh cell
    pool.release_all(src);
    CHECK(pool.bytes() == 0u);
    CHECK(pool.live() == 0u);
}

// free(p)'s test of a chunk start: the multiply and rotate against division,
// for every chunk size a heap cuts (multiples of 16 up to 64 KiB, and
// others), at every offset of a span's first chunks, around the handed
// bound, and at random offsets up to a 4 GiB span.
TEST_CASE("span: chunk_number tells chunk starts from every other offset", "[backend]") {
    std::mt19937_64 rng(7);
    auto check = [&](std::uint32_t c) {
        be::span sp;
        sp.set_chunk(c);
        auto expect = [&](std::uint64_t off) {
            const std::uint64_t k = sp.chunk_number(off);
            if (off % c == 0) REQUIRE(k == off / c);
            else REQUIRE(k > ~std::uint64_t{0} / c);   // past any chunk count
        };
        if (c <= 1024)
            for (std::uint64_t off = 0; off < 4 * std::uint64_t{c}; ++off) expect(off);
        for (std::uint64_t k : {std::uint64_t{1}, std::uint64_t{2}, std::uint64_t{3}, std::uint64_t{1} << 20,
                                std::uint64_t{1} << 26})
            for (std::uint64_t d = 0; d < 17; ++d) expect(k * c + d), expect(k * c - d);
        for (int i = 0; i < 64; ++i) expect(rng() % (std::uint64_t{4} << 30));
    };
    for (std::uint32_t c = 16; c <= 65536; c += 16) check(c);
    for (std::uint32_t c : {1u, 3u, 8u, 24u, 40u, 1000u, 4095u, 4097u, 1u << 20, (1u << 20) + 48}) check(c);
}

TEST_CASE("page_map: set, find, clear; a failed set leaves no entry", "[backend]") {
    auto& map = be::page_map::instance();
    void* m = ::mmap(nullptr, 64 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(m != MAP_FAILED);
    auto* b = static_cast<std::byte*>(m);
    be::span s;
    REQUIRE(map.set(b + 8 * page, 16, &s));
    CHECK(map.find(b + 8 * page) == &s);
    CHECK(map.find(b + 24 * page - 1) == &s);
    CHECK(map.find(b + 24 * page) == nullptr);
    CHECK(map.find(b + 8 * page - 1) == nullptr);
    map.clear(b + 8 * page, 16);
    CHECK(map.find(b + 10 * page) == nullptr);
    // Beyond 47-bit user space: refused, nothing found.
    CHECK(!map.set(reinterpret_cast<void*>(std::uintptr_t{1} << 50), 1, &s));
    CHECK(map.find(reinterpret_cast<void*>(std::uintptr_t{1} << 50)) == nullptr);
    CHECK(map.find(nullptr) == nullptr);
    ::munmap(m, 64 * page);
    // A range in a gigabyte no leaf covers yet, with the leaf mapping refused.
    void* far = reinterpret_cast<void*>(std::uintptr_t{0x3f00} << 30);
    if (map.find(far) == nullptr) {
        map.inject_leaf_failures(1);
        CHECK(!map.set(far, 4, &s));
        CHECK(map.find(far) == nullptr);
        CHECK(map.set(far, 4, &s));   // the next try works
        CHECK(map.find(static_cast<std::byte*>(far) + 3 * page) == &s);
        map.clear(far, 4);
    }
    CHECK(map.resident_bytes() > 0u);
}

// VmSize in KiB, read without allocating (for a forked child about to set
// RLIMIT_AS); 0 when it cannot be read.
namespace {
unsigned long long vm_size_kib() {
    char buf[4096];
    const int fd = ::open("/proc/self/status", O_RDONLY);
    const ssize_t got = fd >= 0 ? ::read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0) ::close(fd);
    if (got <= 0) return 0;
    buf[got] = '\0';
    const char* v = std::strstr(buf, "VmSize:");
    return v ? std::strtoull(v + 7, nullptr, 10) : 0;
}
} // namespace

// free's lookup makes no null test: where no span is, it gets the map's
// empty span, which every free refuses (no owner, no chunk handed out).
TEST_CASE("page_map: the empty span answers for every page no span holds", "[backend]") {
    be::page_map map{24};
    auto check_empty = [&](const void* p) {
        const be::span* e = map.find_wrapped(p);
        REQUIRE(e != nullptr);
        CHECK(e->owner == nullptr);
        CHECK(e->handed_chunks() == 0u);
        CHECK(!e->chunk_start(p));
        CHECK(e->state != be::span_state::large);
        CHECK(map.find(p) == nullptr);
    };
    int local = 0;
    const void* probes[] = {nullptr, &local, &map, reinterpret_cast<void*>(std::uintptr_t{1} << 50),
                            reinterpret_cast<void*>(~std::uintptr_t{0} - 7)};
    // Before the first set(): the static map of one entry.
    CHECK(map.window_bits() == 0u);
    for (const void* p : probes) check_empty(p);
    void* m = ::mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(m != MAP_FAILED);
    be::span s;
    s.base = static_cast<std::byte*>(m);
    s.bytes = 2 * page;
    REQUIRE(map.set(m, 2, &s));
    CHECK(map.window_bits() == 24u);
    CHECK(map.find_wrapped(m) == &s);
    CHECK(map.find(static_cast<std::byte*>(m) + page + 100) == &s);
    for (const void* p : probes) check_empty(p);
    check_empty(static_cast<std::byte*>(m) + 2 * page);
    map.clear(m, 2);
    check_empty(m);
    CHECK(map.leaves() >= 1u);
    CHECK(map.resident_bytes() >= page);
    ::munmap(m, 4 * page);
}

// A window smaller than user space (what a `ulimit -v` or valgrind leaves):
// pages 4 GiB apart share an entry here, and the map refuses the second span
// rather than answer for the wrong one.
TEST_CASE("page_map: in a window, pages that share an entry are refused, never confused", "[backend]") {
    be::page_map map{20};   // 2^20 pages: 4 GiB of addresses
    constexpr std::uintptr_t window = std::uintptr_t{1} << 32;
    // Addresses are only recorded, never touched: any page-aligned ones do.
    const std::uintptr_t x = (std::uintptr_t{0x5a} << 32) + 0x1234000;
    auto at = [](std::uintptr_t a) { return reinterpret_cast<std::byte*>(a); };
    be::span s1, s2, s3;
    s1.base = at(x);
    s1.bytes = 4 * page;
    // In use and cut into 64-byte chunks, all handed out, as a refill leaves
    // a span (its in-use fields share bytes with a free span's set hook, so a
    // record not opened by a registry holds whatever was there).
    s1.clear_in_use();
    s1.set_chunk(64);
    s1.set_handed(4 * page / 64);
    s2.base = at(x + window);
    s2.bytes = page;
    REQUIRE(map.set(s1.base, 4, &s1));
    CHECK(map.window_bits() == 20u);
    // x + 4 GiB has x's entry: refused while s1 holds it.
    CHECK(!map.set(s2.base, 1, &s2));
    CHECK(map.find(s2.base) == nullptr);
    CHECK(map.find(s1.base) == &s1);
    CHECK(map.find(s1.base + 3 * page) == &s1);
    CHECK(map.find_wrapped(s2.base) == &s1);   // the shared entry: free's chunk test refuses it
    CHECK(!s1.chunk_start(s2.base));
    // Clearing the alias's pages leaves s1's entries alone.
    map.clear(s2.base, 1);
    CHECK(map.find(s1.base) == &s1);
    // A span whose fifth page meets s1's first entry: refused whole, its
    // first four entries undone.
    s3.base = at(x + window - 4 * page);
    s3.bytes = 8 * page;
    CHECK(!map.set(s3.base, 8, &s3));
    for (std::size_t i = 0; i < 4; ++i) CHECK(map.find(s3.base + i * page) == nullptr);
    CHECK(map.find(s1.base) == &s1);
    // With s1 gone, the alias takes the entry, and x is no longer found.
    map.clear(s1.base, 4);
    REQUIRE(map.set(s2.base, 1, &s2));
    CHECK(map.find(s2.base) == &s2);
    CHECK(map.find(s1.base) == nullptr);
    CHECK(!map.set(s1.base, 4, &s1));
    map.clear(s2.base, 1);
    CHECK(map.set(s1.base, 4, &s1));
    CHECK(map.find(s1.base + page) == &s1);
}

#if !defined(__SANITIZE_THREAD__)
// Started under a `ulimit -v` that cannot hold the 256 GiB map: the map takes
// a window that leaves the program its room, and works.
TEST_CASE("page_map: under an address-space limit, the map takes a window and works", "[backend]") {
    const int status = exit_status_in_child([] {
        const unsigned long long vm_kib = vm_size_kib();
        if (vm_kib == 0) ::_exit(4);
        const rlim_t limit = static_cast<rlim_t>(vm_kib) * 1024 + (rlim_t{4} << 30);
        const rlimit rl{limit, limit};
        if (::setrlimit(RLIMIT_AS, &rl) != 0) ::_exit(5);
        static be::page_map map;
        void* m = ::mmap(nullptr, 64 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) ::_exit(6);
        be::span s;
        s.base = static_cast<std::byte*>(m);
        s.bytes = 64 * page;
        if (!map.set(m, 64, &s)) ::_exit(1);
        const unsigned w = map.window_bits();
        if (w >= be::page_map::max_window_bits || w < 20) ::_exit(2);
        if (map.find(static_cast<std::byte*>(m) + 63 * page) != &s || map.find_wrapped(m) != &s) ::_exit(3);
        // A map of at most 1 GiB and 1/64 of the limit.
        if (w > 27 || (std::size_t{8} << w) > limit / 64) ::_exit(7);
    });
    INFO("child exit status (1: set refused; 2: no window; 3: lookups; 7: window too large; 4-6: set-up)");
    CHECK(status == 0);
}
#endif

#if !defined(__SANITIZE_THREAD__)
// Velox and Medius map their class tables when the heap is built
// (detail/mapped_array.hpp): with no address space left, the constructor
// throws bad_alloc and nothing is left mapped or held; once the limit is
// lifted, a heap is built and serves.
TEMPLATE_TEST_CASE("heap: a class table that cannot be mapped makes the constructor throw bad_alloc",
                   "[backend][bad_input]", al::velox_heap<>, al::medius_heap<>) {
    const int status = exit_status_in_child([] {
        // One bad_alloc thrown and caught first: the exception's own
        // allocation (the sanitizers' malloc included) then needs no new
        // mapping under the limit.
        try {
            al::detail::throw_bad_alloc();
        } catch (const std::bad_alloc&) {
        }
        rlimit old{};
        if (::getrlimit(RLIMIT_AS, &old) != 0) ::_exit(5);
        alignas(TestType) static std::byte storage[sizeof(TestType)];
        // Margins of 0, 64 KiB, 128 KiB ... above the mapped total, up to the
        // first at which the heap is built: below it some tables may map
        // before one fails, and those must be unmapped again.
        int refused = 0;
        for (rlim_t margin = 0;; margin += 64 << 10) {
            const unsigned long long vm_kib = vm_size_kib();
            if (vm_kib == 0) ::_exit(4);
            const rlimit rl{static_cast<rlim_t>(vm_kib) * 1024 + margin, old.rlim_max};
            if (::setrlimit(RLIMIT_AS, &rl) != 0) ::_exit(5);
            bool threw = false;
            try {
                ::new (storage) TestType();
            } catch (const std::bad_alloc&) {
                threw = true;
            }
            if (!threw) {
                std::launder(reinterpret_cast<TestType*>(storage))->~TestType();
                if (vm_size_kib() != vm_kib) ::_exit(6);   // the built heap's tables not unmapped
                break;
            }
            ++refused;
            if (vm_size_kib() != vm_kib) ::_exit(2);   // a table of the failed build left mapped
            if (margin > rlim_t{1} << 30) ::_exit(7);
        }
        if (refused == 0) ::_exit(1);
        if (::setrlimit(RLIMIT_AS, &old) != 0) ::_exit(5);
        auto* h = ::new (storage) TestType();
        void* p = h->allocate(al::request{100});
        if (!p) ::_exit(3);
        std::memset(p, 0x5a, 100);
        h->deallocate(p);
        h->~TestType();
    });
    INFO("child exit status (1: no bad_alloc; 2: a table left mapped; 3: no block after the limit; 6: tables not "
         "unmapped; 7: no heap within 1 GiB; 4-5: set-up)");
    CHECK(status == 0);
}
#endif

TEST_CASE("page_map: threads recording disjoint spans see their own entries", "[backend][threads]") {
    auto& map = be::page_map::instance();
    constexpr int threads = 4, pages_each = 512;
    void* m = ::mmap(nullptr, threads * pages_each * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    REQUIRE(m != MAP_FAILED);
    std::vector<be::span> spans(threads);
    std::atomic<int> bad{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
        ts.emplace_back([&, t] {
            std::byte* b = static_cast<std::byte*>(m) + static_cast<std::size_t>(t) * pages_each * page;
            for (int round = 0; round < 50; ++round) {
                if (!map.set(b, pages_each, &spans[t])) ++bad;
                for (int k = 0; k < pages_each; k += 7)
                    if (map.find(b + static_cast<std::size_t>(k) * page) != &spans[t]) ++bad;
                map.clear(b, pages_each);
                if (map.find(b) != nullptr) ++bad;
            }
        });
    for (auto& t : ts) t.join();
    CHECK(bad.load() == 0);
    ::munmap(m, threads * pages_each * page);
}

TEST_CASE("span_pool: spans reused, merged, extended and given back", "[backend]") {
    source_ledger ledger;
    {
        be::span_pool<tracking_source, prompt<al::reclaim_policy::threshold>> pool{tracking_source(ledger)};
        be::span* a = pool.take(4 * page);
        be::span* b = pool.take(4 * page);
        be::span* c = pool.take(4 * page);
        REQUIRE((a && b && c));
        CHECK(b->base == a->end());   // consecutive spans are adjacent
        CHECK(c->base == b->end());
        std::memset(a->base, 1, a->bytes);
        pool.give(b);
        // b's pages serve the next request of that size.
        be::span* b2 = pool.take(4 * page);
        CHECK(b2->base == a->end());
        // a grows into the free pages after it only when they are free.
        CHECK(!pool.extend(a, 8 * page));
        pool.give(b2);
        CHECK(pool.extend(a, 8 * page));
        CHECK(a->bytes == 8 * page);
        CHECK(pool.shrink(a, 2 * page));
        CHECK(a->bytes == 2 * page);
        be::span* d = pool.take(6 * page);   // the tail a gave back
        CHECK(d->base == a->end());
        pool.give(a);
        pool.give(c);
        pool.give(d);
        // Retention 0, purge delay 0: everything is back with the source (the
        // record slab stays until trim finds no record in use).
        pool.trim();
        CHECK(pool.stats().os_bytes == 0u);
        CHECK(pool.stats().free_bytes == 0u);
    }
    CHECK(ledger.balanced());
}

// A source that hands out consecutive ranges of one reservation and grows
// the range that ends at its top (what arena_source does at an arena's free
// end), with nothing else in the process taking ranges between: a ledger of
// what is held, by base, checks that the grown range comes back whole.
struct frontier_source {
    struct book {
        std::byte* base = nullptr;
        std::size_t size = 0, top = 0, extensions = 0, refused = 0, bad = 0;
        std::map<std::uintptr_t, std::size_t> live;
    };
    book* b;
    explicit frontier_source(book& k) noexcept : b(&k) {}
    void* allocate(std::size_t n, const void*) noexcept {
        if (n > b->size - b->top) return nullptr;
        std::byte* p = b->base + b->top;
        b->top += n;
        b->live[addr(p)] = n;
        return p;
    }
    void deallocate(void* p, std::size_t n) noexcept {
        auto it = b->live.find(addr(p));
        if (it == b->live.end() || it->second != n) ++b->bad;
        else b->live.erase(it);
    }
    bool extend(void* p, std::size_t n, std::size_t more) noexcept {
        auto it = b->live.find(addr(p));
        if (it == b->live.end() || it->second != n || static_cast<std::byte*>(p) + n != b->base + b->top ||
            more > b->size - b->top) {
            ++b->refused;
            return false;
        }
        b->top += more;
        it->second += more;
        ++b->extensions;
        return true;
    }
};
static_assert(al::extending_source<frontier_source>);

TEST_CASE("span_pool: a span at its region's end grows by the source's pages after it", "[backend][large]") {
    constexpr std::size_t mib = std::size_t{1} << 20;
    frontier_source::book book;
    book.size = 64 * mib;
    void* m = ::mmap(nullptr, book.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    REQUIRE(m != MAP_FAILED);
    book.base = static_cast<std::byte*>(m);
    {
        // Regions of 1 MiB; a larger request is a region of its own.
        using opts = al::configured<al::heap_config{.min_growth = mib, .max_growth = mib, .retain_bytes = 0,
                                                    .purge_delay_ms = 0}>;
        be::span_pool<frontier_source, opts> pool{frontier_source(book)};
        be::span* a = pool.take(6 * mib);   // a region of its own, at the source's top
        REQUIRE(a);
        std::memset(a->base, 5, a->bytes);
        const std::size_t os = pool.stats().os_bytes;
        // No free range after it: the region grows, and the span with it.
        CHECK(pool.extend(a, 10 * mib));
        CHECK(a->bytes == 10 * mib);
        CHECK(book.extensions == 1u);
        CHECK(pool.stats().os_bytes == os + 4 * mib);
        CHECK(a->base[6 * mib - 1] == std::byte{5});
        a->base[10 * mib - 1] = std::byte{6};   // the new pages are the span's
        // Its tail given back is a free range at the region's end: growing
        // again takes that range first and only the rest from the source.
        CHECK(pool.shrink(a, 9 * mib));
        CHECK(pool.extend(a, 12 * mib));
        CHECK(book.extensions == 2u);
        CHECK(pool.stats().os_bytes == os + 6 * mib);
        // Another region after it: the source refuses, nothing changes.
        be::span* b = pool.take(2 * mib);
        REQUIRE(b);
        CHECK(!pool.extend(a, 13 * mib));
        CHECK(a->bytes == 12 * mib);
        CHECK(book.extensions == 2u);
        pool.give(a);
        pool.give(b);
        pool.trim();
        CHECK(pool.stats().os_bytes == 0u);
    }
    CHECK(book.live.empty());   // every range back, the grown one whole
    CHECK(book.bad == 0u);
    ::munmap(m, book.size);
}

TEST_CASE("arena_source: a range grows into the free pages after it, within its arena", "[backend][sources]") {
    al::arena_source s;
    auto* a = static_cast<std::byte*>(s.allocate(48 * page, nullptr));
    REQUIRE(a);
    // [a, a+16p) held, [a+16p, a+32p) free, [a+32p, a+48p) held.
    s.deallocate(a + 16 * page, 16 * page);
    const std::size_t held = al::arena_source::handed_out_bytes();
    CHECK(!s.extend(a, 16 * page, 17 * page));   // more than the free range
    CHECK(al::arena_source::handed_out_bytes() == held);
    CHECK(s.extend(a, 16 * page, 10 * page));
    CHECK(al::arena_source::handed_out_bytes() == held + 10 * page);
    std::memset(a, 1, 26 * page);   // the grown range is ours to write
    CHECK(s.extend(a, 26 * page, 6 * page));
    CHECK(!s.extend(a, 32 * page, page));   // the next range is held
    s.deallocate(a, 32 * page);   // the grown range comes back whole
    CHECK(al::arena_source::handed_out_bytes() == held - 16 * page);
    // Free again, [a, a+32p) takes the same growth a second time.
    void* c = s.allocate(16 * page, nullptr);
    if (c == a) {
        CHECK(s.extend(c, 16 * page, 16 * page));
        s.deallocate(c, 32 * page);
    } else {
        s.deallocate(c, 16 * page);
    }
    s.deallocate(a + 32 * page, 16 * page);
    CHECK(al::arena_source::handed_out_bytes() == held - 32 * page);
}

TEST_CASE("arena_source: move takes a range's pages to a mapping of their own", "[backend][sources]") {
    al::arena_source s;
    const std::size_t n = 64 * page, m = 160 * page;
    auto* a = static_cast<std::byte*>(s.allocate(n, nullptr));
    auto* after = static_cast<std::byte*>(s.allocate(16 * page, nullptr));   // a's pages cannot grow in place
    REQUIRE(a);
    REQUIRE(after);
    for (std::size_t i = 0; i < n; i += 64) a[i] = static_cast<std::byte>(i / 64 * 7 + 1);
    const std::size_t held = al::arena_source::handed_out_bytes();
    auto* to = static_cast<std::byte*>(s.allocate_apart(m));
    REQUIRE(to);
    CHECK(al::arena_source::handed_out_bytes() == held + m);
    {   // Not the size allocate_apart gave, or not one of its ranges: the caller's bug, aborted.
        auto [aborted, err] = in_child([&] { (void)s.move(a, n, to, n - page); });
        CHECK(aborted);
        CHECK(err.find("arena_source::move: target is not a range of allocate_apart's") != std::string::npos);
        CHECK(in_child([&] { (void)s.move(a, n, after, 16 * page); }).first);
        CHECK(in_child([&] { (void)s.move(to + page, page, to, m); }).first);   // `to` holds `from`
    }
    CHECK(al::arena_source::handed_out_bytes() == held + m);
    {   // A target too small for the range: refused, and the target taken back.
        auto* small = static_cast<std::byte*>(s.allocate_apart(n - page));
        REQUIRE(small);
        CHECK(!s.move(a, n, small, n - page));
        CHECK(al::arena_source::handed_out_bytes() == held + m);
        CHECK(!mapped(small, n - page));
    }
    CHECK(s.move(a, n, to, m));
    CHECK(al::arena_source::handed_out_bytes() == held + m - n);   // `a` taken back
    bool same = true, zero = true;
    for (std::size_t i = 0; i < n; i += 64) same = same && to[i] == static_cast<std::byte>(i / 64 * 7 + 1);
    for (std::size_t i = n; i < m; i += 64) zero = zero && to[i] == std::byte{0};
    CHECK(same);
    CHECK(zero);
    std::memset(to, 3, m);   // all of it ours to write
    // `a`'s addresses are the arena's free space again (mapped anew, zero).
    auto* again = static_cast<std::byte*>(s.allocate(n, nullptr));
    REQUIRE(again);
    if (again == a) CHECK(a[0] == std::byte{0});
    std::memset(again, 4, n);
    // A range across two mappings of the kernel's (its second half read-only)
    // is refused before anything moves: mremap would unmap the target first.
    // The target is taken back.
    const std::size_t before = al::arena_source::handed_out_bytes();
    auto* to2 = static_cast<std::byte*>(s.allocate_apart(2 * m));
    REQUIRE(to2);
    REQUIRE(::mprotect(again + n / 2, n / 2, PROT_READ) == 0);
    CHECK(!s.move(again, n, to2, 2 * m));
    CHECK(al::arena_source::handed_out_bytes() == before);
    CHECK(std::to_integer<int>(again[0]) == 4);
    CHECK(std::to_integer<int>(again[n - 1]) == 4);
    REQUIRE(::mprotect(again + n / 2, n / 2, PROT_READ | PROT_WRITE) == 0);
    // A range that is a whole arena of allocate_apart's moves, and its arena goes.
    to2 = static_cast<std::byte*>(s.allocate_apart(2 * m));
    REQUIRE(to2);
    CHECK(s.move(to, m, to2, 2 * m));
    CHECK(std::to_integer<int>(to2[m - 1]) == 3);
    s.deallocate(to2, 2 * m);
    s.deallocate(again, n);
    s.deallocate(after, 16 * page);
    CHECK(al::arena_source::handed_out_bytes() == held - 16 * page - n);
}

TEST_CASE("detail::map_again never maps over addresses somebody holds", "[backend][sources]") {
    // What arena_source::move does with a target mremap may have unmapped
    // before failing: map it again only where none of it is mapped.
    const std::size_t n = 8 * page;
    auto* r = static_cast<std::byte*>(::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    REQUIRE(r != MAP_FAILED);
    std::memset(r, 7, n);
    CHECK(!al::detail::map_again(r, n));   // still mapped: untouched
    CHECK(std::to_integer<int>(r[n - 1]) == 7);
    REQUIRE(::munmap(r, n) == 0);
    CHECK(al::detail::map_again(r, n));   // unmapped: mapped again, fresh
    CHECK(std::to_integer<int>(r[0]) == 0);
    std::memset(r, 8, n);
    // Part of it taken by another mapping (another thread's mmap): refused,
    // that mapping untouched.
    REQUIRE(::munmap(r, n) == 0);
    void* other = ::mmap(r + 3 * page, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    REQUIRE(other == r + 3 * page);
    static_cast<std::byte*>(other)[0] = std::byte{9};
    CHECK(!al::detail::map_again(r, n));
    CHECK(mapped(r + 3 * page, page));
    CHECK(!mapped(r, page));
    CHECK(std::to_integer<int>(r[3 * page]) == 9);
    ::munmap(other, page);
}

TEST_CASE("detail::one_mapping tells a range in two kernel mappings", "[backend][sources]") {
    const std::size_t n = 4 * page;
    // A page more, unmapped again: no mapping follows the range.
    auto* r = static_cast<std::byte*>(::mmap(nullptr, n + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    REQUIRE(r != MAP_FAILED);
    REQUIRE(::munmap(r + n, page) == 0);
    r[0] = std::byte{1};
    CHECK(al::detail::one_mapping(r, n));
    CHECK(al::detail::one_mapping(r, page));   // a range that does not end its mapping
    REQUIRE(::mprotect(r + 2 * page, page, PROT_READ) == 0);
    CHECK(!al::detail::one_mapping(r, n));
    CHECK(al::detail::one_mapping(r, 2 * page));
    CHECK(std::to_integer<int>(r[0]) == 1);
    CHECK(!mapped(r + n, page));   // the probe's page is not left behind
    ::munmap(r, n);
}

TEST_CASE("heap: a large block that cannot grow in place moves without a copy", "[backend]") {
    constexpr std::size_t mib = std::size_t{1} << 20;
    al::segregated_heap<al::arena_source> h;
    auto* p = static_cast<unsigned char*>(h.allocate(al::request{6 * mib}));
    void* next = h.allocate(al::request{6 * mib});   // right after p: no growth in place
    REQUIRE(p);
    REQUIRE(next);
    for (std::size_t i = 0; i < 6 * mib; i += 512) p[i] = static_cast<unsigned char>(i >> 9);
    CHECK(h.try_move_large(p, 100) == nullptr);   // growth only
    next = h.try_move_large(next, 8 * mib);   // the neighbour moves too: it ends its region
    REQUIRE(next);
    auto* q = static_cast<unsigned char*>(h.try_move_large(p, 20 * mib));
    REQUIRE(q);
    CHECK(q != p);
    CHECK(h.usable_size(q) >= 20 * mib);
    bool same = true;
    for (std::size_t i = 0; i < 6 * mib; i += 512) same = same && q[i] == static_cast<unsigned char>(i >> 9);
    CHECK(same);
    std::memset(q + 6 * mib, 5, 14 * mib);
    CHECK(al::segregated_heap<al::arena_source>::owner_of(q) == h.owner_tag());
    CHECK(al::segregated_heap<al::arena_source>::owner_of(p) == nullptr);   // the old address is no block
    // Its new mapping is exactly its size: it grows by moving again.
    CHECK(!h.try_grow_large(q, 40 * mib));
    auto* q2 = static_cast<unsigned char*>(h.try_move_large(q, 40 * mib));
    REQUIRE(q2);
    CHECK(q2[20 * mib - 1] == 5);
    std::memset(q2 + 20 * mib, 6, 20 * mib);
    auto* r = static_cast<unsigned char*>(h.try_move_large(q2, 90 * mib));
    REQUIRE(r);
    CHECK(r[0] == 0);
    CHECK(r[6 * mib] == 5);
    CHECK(r[40 * mib - 1] == 6);
    // A small block, or a block aligned beyond a page, does not move.
    void* small = h.allocate(al::request{64});
    void* aligned = h.allocate(al::request{6 * mib, nullptr, 1 << 16});
    REQUIRE(aligned);
    CHECK(h.try_move_large(small, 8 * mib) == nullptr);
    // Its payload is offset in its span unless the span happens to start
    // aligned; moved or not, it stays aligned.
    if (void* moved = h.try_move_large(aligned, 8 * mib)) aligned = moved;
    CHECK(reinterpret_cast<std::uintptr_t>(aligned) % (1 << 16) == 0);
    h.deallocate(small);
    h.deallocate(aligned);
    h.deallocate(r);
    h.deallocate(next);
}

TEST_CASE("span_pool: free pages beyond the budget are decommitted, within it kept", "[backend]") {
    using opts = al::configured<al::heap_config{.retain_bytes = 64 * page, .purge_delay_ms = 0}>;
    be::span_pool<al::counting_source<al::mmap_source>, opts> pool;
    std::vector<be::span*> v;
    for (int i = 0; i < 64; ++i) {
        be::span* s = pool.take(8 * page);
        REQUIRE(s);
        std::memset(s->base, 7, s->bytes);
        v.push_back(s);
    }
    for (be::span* s : v) pool.give(s);
    const be::pool_stats st = pool.stats();
    // Beyond the budget, pages went back (decommitted, or whole regions returned).
    CHECK(st.resident_free_bytes <= 64u * page);
    CHECK(st.decommitted_bytes + st.returned_bytes >= 64u * 8 * page - 4 * 64 * page);
    // Reused pages read as data or zero, never garbage: decommitted ones are zero.
    be::span* again = pool.take(8 * page);
    REQUIRE(again);
    if (again->dirty == 0)
        for (std::size_t k = 0; k < again->bytes; k += 512) CHECK(again->base[k] == std::byte{0});
    pool.give(again);
    pool.trim();
    CHECK(pool.stats().resident_free_bytes == 0u);
}

TEST_CASE("span_pool: the budget's peak is recent: after a spike the cache shrinks to retain_bytes", "[backend]") {
    constexpr std::size_t mib = std::size_t{1} << 20;
    using opts = al::configured<al::heap_config{.retain_bytes = mib, .purge_delay_ms = 1000}>;
    be::span_pool<al::counting_source<al::mmap_source>, opts> pool;
    std::vector<be::span*> v;
    for (int i = 0; i < 64; ++i) {
        be::span* s = pool.take(8 * mib);   // each a region of its own
        REQUIRE(s);
        std::memset(s->base, 7, s->bytes);
        v.push_back(s);
    }
    for (be::span* s : v) pool.give(s);
    // Just after the spike its peak sets the budget: 512 MiB / 8 stay cached.
    CHECK(pool.retain_budget() >= 64 * mib);
    CHECK(pool.stats().resident_free_bytes >= 56 * mib);
    // Purge delay 2 ms from here: the budget's peak covers the last 20-40 ms.
    pool.set_retention(mib, 2);
    // A program that goes on with one block of 1 MiB: within a few windows the
    // budget is retain_bytes again and the spike's pages are gone. (A loaded
    // machine may stretch the sleeps; the bound is generous, the check exact.)
    bool shrunk = false;
    for (int i = 0; i < 400 && !shrunk; ++i) {
        ::usleep(2000);
        be::span* s = pool.take(mib);
        REQUIRE(s);
        std::memset(s->base, 9, 4096);
        pool.give(s);
        shrunk = pool.retain_budget() == mib;
    }
    CHECK(shrunk);
    CHECK(pool.stats().resident_free_bytes <= 2 * mib);
    pool.trim();
    CHECK(pool.stats().resident_free_bytes == 0u);
}

TEST_CASE("arena_source: consecutive ranges are adjacent, freed ranges reused", "[backend][sources]") {
    al::arena_source s;
    void* a = s.allocate(16 * page, nullptr);
    void* b = s.allocate(16 * page, nullptr);
    REQUIRE((a && b));
    CHECK(addr(b) == addr(a) + 16 * page);
    std::memset(a, 1, 16 * page);
    s.deallocate(a, 16 * page);
    void* c = s.allocate(8 * page, nullptr);
    CHECK(c == a);   // the freed range, lowest first
    // Freed pages were given back: they read as zero.
    CHECK(static_cast<unsigned char*>(c)[100] == 0);
    s.deallocate(b, 16 * page);
    s.deallocate(c, 8 * page);
    CHECK(al::arena_source::reserved_bytes() >= al::arena_source::handed_out_bytes());
}

// Each arena starts on a 2 MiB boundary, so that where spans land among the
// classes of an address attribute (64 KiB vicinities, pages) does not depend
// on what the process mapped before. The range that made a new arena is the
// arena's first.
TEST_CASE("arena_source: a new arena starts on a 2 MiB boundary", "[backend][sources]") {
    const int status = exit_status_in_child([] {
        al::arena_source s;
        for (int i = 0; i < 512; ++i) {
            const std::size_t before = al::arena_source::reserved_bytes();
            void* p = s.allocate(std::size_t{8} << 20, nullptr);
            if (!p) ::_exit(2);
            if (al::arena_source::reserved_bytes() != before)
                ::_exit(addr(p) % al::arena_source::arena_align == 0 ? 0 : 1);
        }
        ::_exit(3);
    });
    INFO("child exit status (1: the new arena is not aligned; 2, 3: no new arena)");
    CHECK(status == 0);
}

// Under a tight `ulimit -v`, an arena mapped after the system refused a
// larger one takes half of what it could: with all of it, the page-map
// leaves and span records mapped beside the arenas found no address space,
// and a heap with free arena space failed (the malloc's reuse_sizes test, one
// run in eight, 2026-11-27).
TEST_CASE("arena_source: near the address-space limit, an arena leaves room beside it", "[backend][sources]") {
    const int status = exit_status_in_child([] {
        al::arena_source s;
        // Reservations double up to 1 GiB: after these, the next one tries
        // 1 GiB first, and is refused below.
        for (int i = 0; i < 5; ++i)
            if (!s.allocate(std::size_t{300} << 20, nullptr)) ::_exit(3);
        const unsigned long long vm_kib = vm_size_kib();
        if (vm_kib == 0) ::_exit(4);
        // 130 MiB left: 1 GiB, 512 and 256 MiB are refused, 128 MiB would fit.
        const rlim_t limit = static_cast<rlim_t>(vm_kib) * 1024 + (rlim_t{130} << 20);
        const rlimit rl{limit, limit};
        if (::setrlimit(RLIMIT_AS, &rl) != 0) ::_exit(5);
        // Take the free arena space until a new arena is reserved, under the limit.
        for (;;) {
            const std::size_t before = al::arena_source::reserved_bytes();
            if (!s.allocate(std::size_t{8} << 20, nullptr)) ::_exit(2);
            if (al::arena_source::reserved_bytes() != before) break;
        }
        // What a heap maps beside its arenas (page-map leaves, records).
        void* m = ::mmap(nullptr, std::size_t{16} << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ::_exit(m == MAP_FAILED ? 1 : 0);
    });
    INFO("child exit status (1: nothing left beside the arena; 2-5: set-up failed)");
    CHECK(status == 0);
}

// The reason for arena_source: heaps refilling on several threads while other
// threads use glibc's malloc (and its brk) never corrupt either.
TEST_CASE("default source: heaps refilling beside glibc malloc, many runs", "[backend][sources][threads]") {
    for (int run = 0; run < 20; ++run) {
        std::atomic<bool> go{false};
        std::atomic<int> bad{0};
        std::vector<std::thread> ts;
        for (int t = 0; t < 2; ++t)
            ts.emplace_back([&, t] {
                while (!go.load()) {
                }
                al::kingsley_heap<> h;   // default source
                std::vector<std::pair<void*, std::size_t>> v;
                for (int i = 0; i < 3000; ++i) {
                    const std::size_t n = (i % 2 ? 70000 : 16) + static_cast<std::size_t>(i % 300);
                    void* p = h.allocate(al::request{n});
                    std::memset(p, t + 1, n);
                    v.emplace_back(p, n);
                }
                for (auto [p, n] : v) {
                    if (static_cast<unsigned char*>(p)[n - 1] != t + 1) ++bad;
                    h.deallocate(p, al::request{n});
                }
            });
        for (int t = 0; t < 2; ++t)
            ts.emplace_back([&] {
                while (!go.load()) {
                }
                std::vector<void*> v;
                for (int i = 0; i < 3000; ++i) {
                    void* p = std::malloc(static_cast<std::size_t>(16 + (i * 97) % 200000));
                    if (!p) ++bad;
                    v.push_back(p);
                    if (i % 3 == 0) {
                        std::free(v.back());
                        v.pop_back();
                    }
                }
                for (void* p : v) std::free(p);
            });
        go.store(true);
        for (auto& t : ts) t.join();
        REQUIRE(bad.load() == 0);
    }
}

TEST_CASE("sbrk_source: heaps created and destroyed keep the break and free bytes flat", "[backend][sources]") {
    using H = al::kingsley_heap<al::sbrk_source>;
    // Warm up, then cycles: two heaps filled alternately and destroyed.
    auto cycle = [] {
        H a, b;
        std::vector<void*> va, vb;
        for (int i = 0; i < 20000; ++i) {
            va.push_back(a.allocate(al::request{64}));
            vb.push_back(b.allocate(al::request{200}));
        }
        void* big = a.allocate(al::request{1 << 20});
        a.deallocate(big, al::request{1 << 20});
    };
    cycle();
    const auto top = reinterpret_cast<std::uintptr_t>(::sbrk(0));
    const std::size_t free_before = al::sbrk_source::free_bytes();
    for (int i = 0; i < 30; ++i) cycle();
    const auto top_after = reinterpret_cast<std::uintptr_t>(::sbrk(0));
    INFO("break grew by " << (top_after - top) << " bytes over 30 cycles");
    CHECK(top_after - top < std::size_t{16} << 20);   // was +1.3 GB for 300 rounds before ranges were reused
    CHECK(al::sbrk_source::free_bytes() <= free_before + (std::size_t{16} << 20));
}

TEST_CASE("growth cycles: heaps created, filled, cleared and destroyed keep memory flat", "[backend]") {
    auto round = [] {
        al::velox_heap<> a;
        al::quickfit_heap<> b;
        std::vector<void*> va, vb;
        for (int i = 0; i < 100000; ++i) {
            va.push_back(a.allocate(al::request{static_cast<std::size_t>(24 + i % 100), va.empty() ? nullptr : va.back()}));
            vb.push_back(b.allocate(al::request{static_cast<std::size_t>(16 + i % 300)}));
        }
        a.deallocate_all();
        for (int i = 0; i < 1000; ++i) static_cast<void>(a.allocate(al::request{40}));
    };
    round();
    const std::size_t handed = al::arena_source::handed_out_bytes();
    const std::size_t reserved = al::arena_source::reserved_bytes();
    const std::size_t leaves = be::page_map::instance().leaves();
    for (int i = 0; i < 20; ++i) round();
    // (The resident set is not a measure here: ASan quarantines the test's own frees.)
    CHECK(al::arena_source::handed_out_bytes() <= handed + (std::size_t{4} << 20));
    CHECK(al::arena_source::reserved_bytes() <= reserved + (std::size_t{128} << 20));
    CHECK(be::page_map::instance().leaves() <= leaves + 1);
}

TEST_CASE("heap: policies give fully free spans back", "[backend][reclaim]") {
    SECTION("eager: as soon as half is free, and everything when nothing is live") {
        al::quickfit_heap<al::mmap_source, prompt<al::reclaim_policy::eager>> h;
        std::vector<void*> v;
        for (int i = 0; i < 200000; ++i) v.push_back(h.allocate(al::request{32}));
        const std::size_t held = h.stats().small_span_bytes;
        CHECK(held >= 200000u * 32);
        for (void* p : v) h.deallocate(p, al::request{32});
        CHECK(h.stats().small_span_bytes == 0u);
        CHECK(h.stats().reclaims > 0u);
        CHECK(h.stats().live_bytes == 0u);
    }
    SECTION("threshold: from the next refill") {
        al::quickfit_heap<al::mmap_source, prompt<al::reclaim_policy::threshold>> h;
        std::vector<void*> v;
        for (int i = 0; i < 200000; ++i) v.push_back(h.allocate(al::request{32}));
        for (void* p : v) h.deallocate(p, al::request{32});
        const std::size_t held = h.stats().small_span_bytes;
        CHECK(held >= 200000u * 32);   // nothing on the free path
        // A refill sweeps first once the reclaim clock allows. The interval
        // is 0 here, but the clock also waits eight times the last sweep's
        // length (heap::swept), and the allocation phase's refills swept: on
        // a loaded machine under TSan one of those sweeps was descheduled long
        // enough that the first refill came too early. So refill again, a new
        // class each time, a little later each time, until one sweeps.
        constexpr std::size_t sizes[] = {1000, 2000, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128, 200, 400};
        bool swept = false;
        for (std::size_t k = 0; k < std::size(sizes) && !swept; ++k) {
            void* other = h.allocate(al::request{sizes[k]});   // a refill: it sweeps first
            swept = h.stats().small_span_bytes < held / 8;
            h.deallocate(other, al::request{sizes[k]});
            if (!swept) std::this_thread::sleep_for(std::chrono::milliseconds(100 * (k + 1)));
        }
        CHECK(swept);
    }
    SECTION("never: only trim") {
        al::quickfit_heap<al::mmap_source, prompt<al::reclaim_policy::never>> h;
        std::vector<void*> v;
        for (int i = 0; i < 200000; ++i) v.push_back(h.allocate(al::request{32}));
        for (void* p : v) h.deallocate(p, al::request{32});
        void* other = h.allocate(al::request{1000});
        const std::size_t held = h.stats().small_span_bytes;
        CHECK(held >= 200000u * 32);
        h.deallocate(other, al::request{1000});
        CHECK(h.trim() > 0u);
        CHECK(h.stats().small_span_bytes == 0u);
    }
}

TEST_CASE("heap: a fragmented heap that grows sweeps less often, and still reuses what is freed whole",
          "[backend][reclaim]") {
    // No sweep by the clock: only the growth trigger counts here.
    using slow_clock = al::configured<al::heap_config{.reclaim = al::reclaim_policy::threshold,
                                                      .reclaim_interval_ms = 3'600'000}>;
    al::quickfit_heap<al::mmap_source, slow_clock> h;
    std::vector<void*> aged, grown;
    for (int i = 0; i < 100000; ++i) aged.push_back(h.allocate(al::request{64}));
    for (std::size_t i = 0; i < aged.size(); i += 2) h.deallocate(aged[i], al::request{64});
    // Every span of 64-byte chunks is now half free: a sweep finds 3 MB it cannot give back.
    const std::size_t sweeps = h.stats().sweeps, small = h.stats().small_span_bytes;
    for (int i = 0; i < 500000; ++i) grown.push_back(h.allocate(al::request{48}));
    const std::size_t after = h.stats().small_span_bytes;
    REQUIRE(after >= small + 500000u * 48);
    // Growing from 6.4 to 30 MB, a sweep each time the heap takes an eighth
    // more from the system is 6 sweeps; backing off after sweeps that give
    // nothing back makes it 3.
    CHECK(h.stats().sweeps - sweeps <= 4u);
    CHECK(h.stats().reclaims == 0u);
    // Freed whole, the 48-byte spans serve another size before the heap has
    // grown by half again.
    for (void* p : grown) h.deallocate(p, al::request{48});
    std::vector<void*> other;
    for (int i = 0; i < 300000; ++i) other.push_back(h.allocate(al::request{80}));
    CHECK(h.stats().reclaims > 0u);
    CHECK(h.stats().small_span_bytes <= after + after / 2);
    for (void* p : other) h.deallocate(p, al::request{80});
    for (std::size_t i = 1; i < aged.size(); i += 2) h.deallocate(aged[i], al::request{64});
}

TEST_CASE("heap: after a long sweep the clock waits eight times as long (a fragmented heap does not sweep on every refill)",
          "[backend][reclaim]") {
    // Interval 0: the clock alone would let every refill sweep.
    using eager_clock = al::configured<al::heap_config{.reclaim = al::reclaim_policy::threshold, .reclaim_interval_ms = 0}>;
    al::segregated_heap<al::mmap_source, eager_clock> h;
    // A million free 16-byte chunks, one live block in 256 pinning every
    // page: a sweep visits them all (milliseconds) and gives nothing back.
    std::vector<void*> pinned(1'000'000);
    for (void*& p : pinned) p = h.allocate(al::request{16});
    for (std::size_t i = 0; i < pinned.size(); ++i)
        if (i % 256 != 0) h.deallocate(pinned[i], al::request{16});
    const std::size_t sweeps = h.stats().sweeps;
    // 400 blocks of another size: a hundred refills that reach the clock's
    // test, within far less than eight sweeps' time. Before, each swept.
    std::vector<void*> fresh;
    for (int i = 0; i < 400; ++i) {
        fresh.push_back(h.allocate(al::request{1500}));
        std::memset(fresh.back(), i & 0xff, 1500);
    }
    CHECK(h.stats().sweeps - sweeps >= 1u);
    CHECK(h.stats().sweeps - sweeps <= 3u);
    CHECK(h.stats().reclaims == 0u);
    for (int i = 0; i < 400; ++i) {
        CHECK(static_cast<unsigned char*>(fresh[i])[1499] == (i & 0xff));
        h.deallocate(fresh[i], al::request{1500});
    }
    for (std::size_t i = 0; i < pinned.size(); i += 256) h.deallocate(pinned[i], al::request{16});
}

TEST_CASE("heap: trim keeps every live block and gives the rest back", "[backend][reclaim]") {
    al::velox_heap<al::counting_source<al::mmap_source>> h;
    std::mt19937_64 rng(3);
    std::vector<std::pair<unsigned char*, std::size_t>> live;
    for (int i = 0; i < 300000; ++i) {
        const std::size_t n = 16 + rng() % 200;
        auto* p = static_cast<unsigned char*>(h.allocate(al::request{n, live.empty() ? nullptr : live.back().first}));
        std::memset(p, static_cast<int>(n & 0xff), n);
        live.emplace_back(p, n);
    }
    // Free all but a few blocks clustered in one region: most spans empty.
    std::vector<std::pair<unsigned char*, std::size_t>> keep(live.begin(), live.begin() + 1000);
    for (std::size_t i = 1000; i < live.size(); ++i) h.deallocate(live[i].first, al::request{live[i].second});
    const std::size_t before = h.stats().small_span_bytes;
    h.trim();
    CHECK(h.stats().small_span_bytes < before / 10);
    for (auto [p, n] : keep) {
        for (std::size_t k = 0; k < n; ++k) REQUIRE(p[k] == static_cast<unsigned char>(n & 0xff));
        h.deallocate(p, al::request{n});
    }
    // Freed chunks are still served after the sweep put the survivors back.
    for (int i = 0; i < 1000; ++i) h.deallocate(h.allocate(al::request{40}), al::request{40});
}

// Pages of a span, from its first, that are resident now (mincore).
std::size_t resident_pages(const be::span& sp) {
    std::vector<unsigned char> v(sp.bytes / page);
    REQUIRE(::mincore(sp.base, sp.bytes, v.data()) == 0);
    std::size_t n = 0;
    while (n < v.size() && (v[n] & 1)) ++n;
    for (std::size_t k = n; k < v.size(); ++k) REQUIRE((v[k] & 1) == 0);   // a prefix, nothing past it
    return n;
}

// A span of chunks below a page is reserved for its size and handed to the
// partition a refill at a time: one record per reservation, and no page
// written before its chunks are needed.
TEST_CASE("heap: a span of small chunks is reserved for its size and handed out a page at a time", "[backend]") {
    using heap_t = al::quickfit_heap<al::mmap_source, prompt<al::reclaim_policy::never>>;
    constexpr std::size_t reserve = al::heap_config{}.span_reserve;
    auto& map = be::page_map::instance();
    SECTION("one size: chunks in address order, the span's pages made resident one by one") {
        heap_t h;
        std::vector<std::byte*> v;
        v.push_back(static_cast<std::byte*>(h.allocate(al::request{16})));
        const be::span* sp = map.find(v[0]);
        REQUIRE(sp != nullptr);
        CHECK(sp->bytes == reserve);
        CHECK(sp->in_use.handed * sp->chunk == page);
        CHECK(resident_pages(*sp) == 1);
        CHECK(h.stats().small_span_bytes == reserve);
        for (std::size_t i = 1; i < reserve / 16; ++i) {
            v.push_back(static_cast<std::byte*>(h.allocate(al::request{16})));
            REQUIRE(v[i] == v[i - 1] + 16);   // the same span, upwards, across refills
            REQUIRE(sp->in_use.handed * 16 == al::detail::round_up((i + 1) * 16, page));
            REQUIRE(resident_pages(*sp) == sp->in_use.handed * 16 / page);
        }
        CHECK(h.stats().small_span_bytes == reserve);   // one record for all of them
        auto* next = static_cast<std::byte*>(h.allocate(al::request{16}));
        CHECK(map.find(next) != sp);   // used up: the next refill takes a new span
        CHECK(h.stats().small_span_bytes == 2 * reserve);
        h.deallocate(next, al::request{16});
        for (std::byte* p : v) h.deallocate(p, al::request{16});
        h.trim();
        CHECK(h.stats().small_span_bytes == 0u);
    }
    SECTION("a span partly handed out goes back when its handed chunks are free") {
        heap_t h;
        void* p = h.allocate(al::request{48});
        CHECK(map.find(p)->in_use.handed * 48 < map.find(p)->bytes);
        h.deallocate(p, al::request{48});
        h.trim();
        CHECK(h.stats().small_span_bytes == 0u);
        // and the heap reserves afresh
        void* q = h.allocate(al::request{48});
        CHECK(h.stats().small_span_bytes == reserve);
        h.deallocate(q, al::request{48});
    }
    SECTION("every size below a page keeps its own span, whatever the others do") {
        al::velox_heap<al::mmap_source, prompt<al::reclaim_policy::never>> h;   // exact sizes
        std::vector<std::pair<std::byte*, std::size_t>> first;
        for (std::size_t n = 8; n < page; n += 8)
            first.emplace_back(static_cast<std::byte*>(h.allocate(al::request{n})), n);
        for (auto [p, n] : first) {
            // Enough chunks for a second refill of this size, after every other size refilled.
            const std::size_t more = page / n + 1;
            std::vector<void*> v;
            for (std::size_t k = 0; k < more; ++k) {
                v.push_back(h.allocate(al::request{n}));
                REQUIRE(map.find(v.back()) == map.find(p));
            }
            for (void* q : v) h.deallocate(q, al::request{n});
        }
        for (auto [p, n] : first) h.deallocate(p, al::request{n});
        h.trim();
        CHECK(h.stats().small_span_bytes == 0u);
    }
    SECTION("chunks of a page or more: the whole span at once") {
        heap_t h;
        void* p = h.allocate(al::request{5000});
        const be::span* sp = map.find(p);
        CHECK(sp->in_use.handed == sp->bytes / sp->chunk);
        h.deallocate(p, al::request{5000});
    }
    SECTION("a pointer past the chunks handed out is one the heap did not hand out") {
        heap_t h;
        auto* p = static_cast<std::byte*>(h.allocate(al::request{64}));
        std::byte* beyond = p + 2 * page;   // in the span, not handed out yet
        CHECK(map.find(beyond) == map.find(p));
        CHECK(heap_t::span_of_any(beyond) == nullptr);
        CHECK(heap_t::span_at(beyond) == map.find(p));   // free's fast path: the span, then the chunk test
        CHECK_FALSE(heap_t::span_at(beyond)->chunk_start(beyond));
        CHECK_FALSE(heap_t::span_at(beyond)->held_chunk_start(beyond));
        CHECK(heap_t::span_at(p)->chunk_start(p));
        CHECK(heap_t::span_at(p)->held_chunk_start(p));
        // Null: the page map's empty span, which no free takes.
        CHECK(heap_t::span_at(nullptr) != nullptr);
        CHECK(heap_t::span_at(nullptr)->owner == nullptr);
        CHECK_FALSE(heap_t::span_at(nullptr)->chunk_start(nullptr));
        CHECK(h.owns(beyond));   // the span is the heap's ...
        const auto [aborted, err] = in_child([&] { h.deallocate(beyond); });
        CHECK(aborted);   // ... but no block starts there
        CHECK(err.find("did not hand out") != std::string::npos);
        h.deallocate(p, al::request{64});
    }
}

// A span record's free-set links share bytes with its in-use fields (the
// large block's request, the sweep's scratch): records go round every state
// here, through merges, splits, sweeps and trims, against a model of the
// live blocks.
TEST_CASE("heap: span records reused across every state", "[backend][reclaim]") {
    al::quickfit_heap<al::mmap_source, prompt<al::reclaim_policy::threshold>> h;
    std::mt19937_64 rng(11);
    constexpr std::size_t sizes[] = {24, 48, 200, 3000, 40 * 1024, 200 * 1024, 1 << 20};
    struct block {
        unsigned char* p;
        std::size_t n;
        unsigned char fill;
    };
    std::vector<block> live;
    using heap_type = decltype(h);
    auto check_and_free = [&](std::size_t i) {
        const block b = live[i];
        REQUIRE(h.usable_size(b.p) >= b.n);
        // free's fast path tells a chunk from the rest by `handed` alone: it
        // must be zero in every span but a small one, whatever the record held
        // before. An address 2^48 past this block has its page-map entry
        // (the map takes page numbers modulo its window), and is no chunk.
        be::span* sp = be::page_map::instance().find(b.p);
        REQUIRE(heap_type::span_of_any(b.p) == sp);
        REQUIRE(heap_type::span_at(b.p) == sp);
        REQUIRE(sp->chunk_start(b.p) == (sp->state == be::span_state::small));
        REQUIRE(sp->held_chunk_start(b.p) == (sp->state == be::span_state::small));
        const auto* wrapped = reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(b.p) + (std::uintptr_t{1} << 48));
        const be::span* at_wrapped = heap_type::span_at(wrapped);
        REQUIRE((at_wrapped == nullptr || !at_wrapped->chunk_start(wrapped)));
        for (std::size_t k = 0; k < b.n; k += 509) REQUIRE(b.p[k] == b.fill);
        REQUIRE(b.p[b.n - 1] == b.fill);
        h.deallocate(b.p, al::request{b.n});
        live[i] = live.back();
        live.pop_back();
    };
    for (int step = 0; step < 30000; ++step) {
        const bool grow = live.size() < 64 || (rng() % 100 < (step / 5000 % 2 ? 30u : 65u));
        if (grow) {
            const std::size_t n = sizes[rng() % std::size(sizes)] - rng() % 8;
            auto* p = static_cast<unsigned char*>(h.allocate(al::request{n}));
            REQUIRE(p != nullptr);
            const auto fill = static_cast<unsigned char>(rng());
            std::memset(p, fill, n);
            live.push_back({p, n, fill});
        } else {
            check_and_free(rng() % live.size());
        }
        if (step % 3989 == 0) h.trim();   // sweeps the small spans, gives free ranges back
    }
    while (!live.empty()) check_and_free(live.size() - 1);
    h.trim();
    CHECK(h.stats().small_span_bytes == 0u);
    CHECK(h.stats().live_bytes == 0u);
}

TEST_CASE("heap: memory freed as one size serves another when the source refuses", "[backend][reclaim]") {
    source_ledger ledger;
    ledger.limit = (std::size_t{8} << 20) + allotheque_test::record_slab;
    {
        al::quickfit_heap<tracking_source, prompt<al::reclaim_policy::never>> h{tracking_source(ledger)};
        std::vector<void*> v;
        while (void* p = h.try_allocate(al::request{24})) v.push_back(p);
        CHECK(v.size() > (std::size_t{6} << 20) / 24);
        for (void* p : v) h.deallocate(p, al::request{24});
        // The source is exhausted, yet other sizes get most of that memory.
        std::size_t got = 0;
        std::vector<std::pair<void*, std::size_t>> w;
        for (std::size_t n : {std::size_t{3000}, std::size_t{100000}})
            while (void* p = h.try_allocate(al::request{n})) {
                w.emplace_back(p, n);
                got += n;
            }
        CHECK(got > (std::size_t{5} << 20));
        for (auto [p, n] : w) h.deallocate(p, al::request{n});
    }
    CHECK(ledger.balanced());
}

TEST_CASE("heap: large blocks are cached, reused, grown in place", "[backend][large]") {
    source_ledger ledger;
    {
        al::kingsley_heap<tracking_source> h{tracking_source(ledger)};
        void* a = h.allocate(al::request{200000});
        h.deallocate(a, al::request{200000});
        const std::size_t allocations = ledger.allocations;
        // Churn of large blocks within the cache: no source calls at all.
        for (int i = 0; i < 1000; ++i) {
            const std::size_t n = 65536 + static_cast<std::size_t>(i * 7919) % (1 << 20);
            void* p = h.allocate(al::request{n});
            static_cast<unsigned char*>(p)[n - 1] = 1;
            h.deallocate(p, al::request{n});
        }
        CHECK(ledger.allocations <= allocations + 50);   // 95 % served from the cache
    }
    CHECK(ledger.balanced());
    {
        // Regions of 1 MiB, so that two large blocks share one.
        al::kingsley_heap<tracking_source, al::configured<al::heap_config{.min_growth = 1 << 20}>> h{
            tracking_source(ledger)};
        // In place: a block grows into the free pages after it.
        void* b = h.allocate(al::request{100000});
        std::memset(b, 9, 100000);
        void* guard = h.allocate(al::request{100000});
        h.deallocate(guard, al::request{100000});
        CHECK(h.try_resize(b, al::request{100000}, 180000));
        CHECK(h.usable_size(b) >= 180000u);
        CHECK(static_cast<unsigned char*>(b)[99999] == 9);
        CHECK(h.try_resize(b, al::request{180000}, 70000));   // shrinking gives the tail back
        CHECK(!h.try_resize(b, al::request{70000}, 100));      // a large block does not become small
        h.deallocate(b, al::request{70000});
        // try_grow_large asks the span, not the request: a block aligned
        // beyond a page is a span of its own at any size, and its size alone
        // called a growth within its size's class a fit (the malloc's
        // realloc: 53,021 B aligned to 8 KiB, then 55,835 B). A fresh heap,
        // so that the pages after the block are free.
        al::segregated_heap<tracking_source, al::configured<al::heap_config{.min_growth = 1 << 20}>> g{
            tracking_source(ledger)};
        void* small = g.allocate(al::request{64});   // first: its span is not the one after c
        const al::request aligned{53021, nullptr, 8192};
        auto* c = static_cast<unsigned char*>(g.allocate(aligned));
        REQUIRE(c);
        CHECK(reinterpret_cast<std::uintptr_t>(c) % 8192 == 0);
        std::memset(c, 7, 53021);
        const std::size_t room = g.usable_size(c), want = room + 1;
        CHECK(!g.try_grow_large(c, 100));   // growth only
        CHECK(!g.try_grow_large(small, 128));   // a chunk of a class is not a span of its own
        g.deallocate(small, al::request{64});
        REQUIRE(g.try_grow_large(c, want));
        CHECK(g.usable_size(c) >= want);
        std::memset(c + 53021, 8, want - 53021);
        auto* next = static_cast<unsigned char*>(g.allocate(al::request{4096}));
        CHECK((next + 4096 <= c || next >= c + want));
        std::memset(next, 9, 4096);
        CHECK(c[53020] == 7);
        CHECK(c[want - 1] == 8);
        g.deallocate(next, al::request{4096});
        g.deallocate(c, al::request{want, nullptr, 8192});
        // request.zero: large blocks read as zero even when their pages are reused.
        void* d = h.allocate(al::request{300000});
        std::memset(d, 0xff, 300000);
        h.deallocate(d, al::request{300000});
        al::request z{300000};
        z.zero = true;
        auto* e = static_cast<unsigned char*>(h.allocate(z));
        bool zero = true;
        for (std::size_t k = 0; k < 300000; k += 97) zero = zero && e[k] == 0;
        CHECK(zero);
        h.deallocate(e, al::request{300000});
    }
    CHECK(ledger.balanced());
}

// ThreadSanitizer allows mappings only in its application ranges.
#if !defined(__SANITIZE_THREAD__)
TEST_CASE("heap: a refill whose page-map record fails fails cleanly", "[backend]") {
    // A heap whose source maps far from everything else, in a gigabyte with no
    // page-map leaf yet: the refill must map one, and that is refused once.
    al::segregated_heap<far_source> h;
    auto& map = be::page_map::instance();
    // The first allocation maps the leaf for the record slab's gigabyte... the
    // slab needs no record; the first span does.
    map.inject_leaf_failures(1);
    void* p = h.try_allocate(al::request{64});
    if (p == nullptr) {
        CHECK(h.stats().small_span_bytes == 0u);   // nothing half-made is held
    }
    // Whatever happened, the heap is consistent: allocations and frees work.
    std::vector<void*> v;
    for (int i = 0; i < 10000; ++i) {
        void* q = h.allocate(al::request{64});
        REQUIRE(h.usable_size(q) == 64u);
        v.push_back(q);
    }
    for (void* q : v) h.deallocate(q);
    if (p) h.deallocate(p);
    map.inject_leaf_failures(0);
}

#endif

TEST_CASE("heap: free marks turn a double free into an abort", "[backend][bad_input]") {
    using marked = al::segregated_heap<al::arena_source, al::configured<al::heap_config{.granularity = 16, .free_marks = true}>>;
    const auto [aborted, err] = in_child([] {
        marked h;
        void* p = h.allocate(al::request{40});
        h.deallocate(p);
        h.deallocate(p);
    });
    CHECK(aborted);
    CHECK(err.find("double free") != std::string::npos);
    // Correct use never trips it: a block freed, handed out again and freed.
    marked h;
    for (int i = 0; i < 100000; ++i) {
        void* p = h.allocate(al::request{static_cast<std::size_t>(16 + i % 500)});
        std::memset(p, 0xff, 16);   // the user's bytes, whatever they are
        h.deallocate(p);
    }
}

TEST_CASE("heap: foreign and interior pointers abort with a message", "[backend][bad_input]") {
    auto expect = [](auto f, const char* what) {
        const auto [aborted, err] = in_child(f);
        CHECK(aborted);
        CHECK(err.find(what) != std::string::npos);
    };
    expect(
        [] {
            al::velox_heap<> h;
            int local = 0;
            // Through a volatile: g++ -O2 would otherwise follow the inlined
            // free past the abort and warn that it writes outside `local`.
            void* volatile q = &local;
            h.deallocate(q);
        },
        "did not hand out");
    expect(
        [] {
            al::velox_heap<> h;
            auto* p = static_cast<std::byte*>(h.allocate(al::request{256}));
            h.deallocate(p + 64);
        },
        "inside a block");
    expect(
        [] {
            al::kingsley_heap<> a, b;
            void* p = a.allocate(al::request{100});
            b.deallocate(p);   // another heap's block
        },
        "did not hand out");
    expect(
        [] {
            al::lea_heap<> h;
            void* p = h.allocate(al::request{1 << 20});
            h.deallocate(p);
            h.deallocate(p);   // a large block freed twice: its pages may be gone
        },
        "did not hand out");
}

namespace {
// A user layer that overrides allocate only: the base must route try_allocate
// (what layers above call) through it.
template <class H>
struct counting_allocate : al::layers::layer<counting_allocate<H>, H> {
    int calls = 0;
    template <al::request_like R = al::request>
    void* allocate(const R& r) {
        ++calls;
        return this->parent_.allocate(r);
    }
};
template <class H>
struct counting_try : al::layers::layer<counting_try<H>, H> {
    int calls = 0;
    template <al::request_like R = al::request>
    void* try_allocate(const R& r) noexcept {
        ++calls;
        return this->parent_.try_allocate(r);
    }
};
} // namespace

TEST_CASE("layer base: a layer overriding only allocate (or only try_allocate) is honoured", "[backend][layers]") {
    counting_allocate<al::kingsley_heap<>> a;
    void* p = a.allocate(al::request{10});
    void* q = a.try_allocate(al::request{10});   // routed through the user's allocate
    CHECK(a.calls == 2);
    a.deallocate(p, al::request{10});
    a.deallocate(q, al::request{10});
    // Under a lock layer, which calls try_allocate.
    al::layers::locked<counting_allocate<al::kingsley_heap<>>> l;
    void* r = l.allocate(al::request{10});
    CHECK(l.parent().calls == 1);
    l.deallocate(r, al::request{10});
    // Failure still reads as nullptr / bad_alloc through the routing.
    CHECK(a.try_allocate(al::request{1, nullptr, 3}) == nullptr);
    CHECK_THROWS_AS(a.allocate(al::request{1, nullptr, 3}), std::bad_alloc);

    counting_try<al::kingsley_heap<>> t;
    void* s = t.allocate(al::request{10});   // allocate() = try_allocate or throw
    CHECK(t.calls == 1);
    CHECK_THROWS_AS(t.allocate(al::request{1, nullptr, 3}), std::bad_alloc);
    CHECK(t.calls == 2);
    t.deallocate(s, al::request{10});
    // Optional members appear exactly when the parent has them.
    static_assert(al::layers::has_trim<counting_try<al::kingsley_heap<>>> &&
                  al::layers::has_unsized_deallocate<counting_try<al::kingsley_heap<>>>);
}

namespace {

// A pool stage of the user's own: the library's span_pool, counting what the
// registry asks of it. Any heap picks it up through its options.
template <al::source S>
class counting_pool : public al::backend::span_pool<S, al::heap_options<>> {
    using base = al::backend::span_pool<S, al::heap_options<>>;

public:
    using base::base;
    static inline std::size_t takes = 0, gives = 0;
    // A pool stage owes the registry nothing in a span's in-use fields: this
    // one hands spans out with them scribbled over.
    al::backend::span* take(std::size_t bytes, const void* near) noexcept {
        ++takes;
        al::backend::span* s = base::take(bytes, near);
        if (s) {
            s->request = ~std::size_t{0};
            s->sweep = {reinterpret_cast<std::byte*>(std::uintptr_t{0x10}), s, 0};   // a sweep would follow 0x10
        }
        return s;
    }
    void give(al::backend::span* s) noexcept {
        ++gives;
        base::give(s);
    }
};

struct counting_pool_options : al::configured<al::heap_config{}> {
    template <al::source S>
    using pool = counting_pool<S>;
};

static_assert(al::backend::span_provider<al::backend::span_pool<al::mmap_source, al::heap_options<>>>);
static_assert(al::backend::span_provider<counting_pool<al::mmap_source>>);
static_assert(!al::backend::span_provider<int>);

} // namespace

TEST_CASE("back-end stages: a heap takes its pool stage from its options", "[backend]") {
    using P = counting_pool<tracking_source>;
    static_assert(std::is_same_v<al::backend::pool_for<tracking_source, counting_pool_options>, P>);
    source_ledger ledger;
    {
        al::velox_heap<tracking_source, counting_pool_options> velox{tracking_source(ledger)};
        al::lea_heap<tracking_source, counting_pool_options> lea{tracking_source(ledger)};
        std::vector<std::pair<void*, std::size_t>> live;
        std::mt19937 rng(7);
        for (int i = 0; i < 20000; ++i) {
            const std::size_t n = 8 + rng() % (i % 100 == 0 ? 300000 : 600);
            void* p = (i % 2 ? static_cast<void*>(velox.allocate(al::request{n})) : lea.allocate(al::request{n}));
            std::memset(p, static_cast<int>(i & 0xff), n);
            live.emplace_back(p, n);
            if (live.size() > 500) {
                const std::size_t k = rng() % live.size();
                auto [q, m] = live[k];
                live[k] = live.back();
                live.pop_back();
                if (velox.owns(q)) velox.deallocate(q, al::request{m});
                else lea.deallocate(q);
            }
            if (i % 5000 == 4999) velox.trim();   // a sweep over spans fresh from the pool stage
        }
        CHECK(P::takes > 0u);
        for (auto [q, m] : live) {
            if (velox.owns(q)) velox.deallocate(q, al::request{m});
            else lea.deallocate(q);
        }
        velox.trim();
        lea.trim();
        CHECK(P::gives > 0u);
    }
    CHECK(ledger.balanced());
}
