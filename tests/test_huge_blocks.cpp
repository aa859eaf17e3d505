// Huge blocks (issue 30 item 2): a large block costs O(1) page-map work and
// metadata whatever its size, and a request no memory could back fails at
// once with nothing left resident. Every heap kind, header-only.
#include <allotheque/allocators/kingsley.hpp>
#include <allotheque/allocators/lea.hpp>
#include <allotheque/allocators/medius.hpp>
#include <allotheque/allocators/quickfit.hpp>
#include <allotheque/allocators/segregated.hpp>
#include <allotheque/allocators/velox.hpp>
#include <allotheque/backend/page_map.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "catch.hpp"

namespace al = allotheque;

namespace {

long rss_kib() {
    FILE* f = std::fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long v = -1;
    while (std::fgets(line, sizeof line, f))
        if (std::strncmp(line, "VmRSS:", 6) == 0) v = std::atol(line + 6);
    std::fclose(f);
    return v;
}

// ASan's shadow and allocator make RSS move by themselves: these checks mean
// something only in an uninstrumented build.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool rss_meaningful = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool rss_meaningful = false;
#else
constexpr bool rss_meaningful = true;
#endif
#else
constexpr bool rss_meaningful = true;
#endif

template <class Heap>
void check_huge() {
    Heap h;
    auto& map = al::backend::page_map::instance();
    {
        // 16 GiB, never touched: may fail (a small machine with strict
        // overcommit), but if it succeeds it costs almost nothing resident.
        const long before = rss_kib();
        auto* p = static_cast<std::byte*>(h.try_allocate(al::request{std::size_t{1} << 34}));
        if (p) {
            if (rss_meaningful) CHECK(rss_kib() - before < 1024);
            CHECK(h.owns(p));
            CHECK(h.usable_size(p) >= (std::size_t{1} << 34));
            // Interior pages map to nothing: refused like a foreign pointer.
            CHECK(map.find(p + (std::size_t{1} << 33)) == nullptr);
            CHECK(Heap::owner_of(p) == h.owner_tag());
            h.deallocate(p);
            h.trim();
            if (rss_meaningful) CHECK(rss_kib() - before < 1024);
        }
    }
    {
        // 64 TiB: no machine backs it; refused quickly, nothing left behind.
        const long before = rss_kib();
        const auto t0 = std::chrono::steady_clock::now();
        void* p = h.try_allocate(al::request{std::size_t{1} << 46});
        const auto dt = std::chrono::steady_clock::now() - t0;
        CHECK(p == nullptr);
        CHECK(dt < std::chrono::seconds(1));
        if (rss_meaningful) CHECK(rss_kib() - before < 1024);
        CHECK_THROWS_AS(h.allocate(al::request{std::size_t{1} << 46}), std::bad_alloc);
        // The heap is still usable, and an aligned large block still works.
        void* q = h.allocate(al::request{100000, nullptr, 8192});
        REQUIRE(q);
        CHECK(reinterpret_cast<std::uintptr_t>(q) % 8192 == 0);
        std::memset(q, 0x5a, 100000);
        h.deallocate(q, al::request{100000, nullptr, 8192});
    }
}

} // namespace

TEST_CASE("huge blocks cost O(1) metadata and impossible ones fail fast", "[backend][bad_input]") {
    SECTION("segregated") { check_huge<al::segregated_heap<>>(); }
    SECTION("quickfit") { check_huge<al::quickfit_heap<>>(); }
    SECTION("kingsley") { check_huge<al::kingsley_heap<>>(); }
    SECTION("velox") { check_huge<al::velox_heap<>>(); }
    SECTION("medius") { check_huge<al::medius_heap<>>(); }
    SECTION("lea") { check_huge<al::lea_heap<>>(); }
}

TEST_CASE("large blocks aligned beyond a page find their span from the payload", "[backend]") {
    al::segregated_heap<> h;
    al::lea_heap<> l;
    for (std::size_t a = 8192; a <= (std::size_t{1} << 22); a *= 4) {
        auto* p = static_cast<std::byte*>(h.allocate(al::request{a + 100, nullptr, a}));
        auto* q = static_cast<std::byte*>(l.allocate(al::request{a + 100, nullptr, a}));
        CHECK(reinterpret_cast<std::uintptr_t>(p) % a == 0);
        CHECK(reinterpret_cast<std::uintptr_t>(q) % a == 0);
        CHECK(h.usable_size(p) >= a + 100);
        CHECK(l.usable_size(q) >= a + 100);
        CHECK(h.owns(p));
        CHECK(l.owns(q));
        h.deallocate(p);
        l.deallocate(q);
    }
}
