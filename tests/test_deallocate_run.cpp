// heap::deallocate_run: a run of same-sized blocks back in one pass, threaded
// through hash_table, list and rb_tree levels (one class lookup per run of
// consecutive same-class chunks). Every partition shape the library ships.
// deallocate_range (a refill's consecutive chunks, linked in place): the same
// placement as the chunks freed one by one from the highest down. A table of
// sizes whose size directory stops vouching places as one whose directory sees.
#include "catch.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <vector>

#include <allotheque/allocators/defero.hpp>
#include <allotheque/allocators/kingsley.hpp>
#include <allotheque/allocators/medius.hpp>
#include <allotheque/allocators/quickfit.hpp>
#include <allotheque/allocators/segregated.hpp>
#include <allotheque/allocators/velox.hpp>
#include <allotheque/malloc/shipped.hpp>
#include <allotheque/sources/counting_source.hpp>
#include <allotheque/sources/malloc_source.hpp>

namespace al = allotheque;

namespace {
using counted = al::counting_source<al::malloc_source>;
}

TEMPLATE_TEST_CASE("deallocate_run returns runs that later allocations reuse", "[deallocate_run]",
                   al::velox_heap<counted>, al::medius_heap<counted>, al::defero_heap<counted>,
                   al::kingsley_heap<counted>, al::quickfit_heap<counted>) {
    TestType h;
    std::mt19937 rng(1);
    for (const std::size_t n : {std::size_t{24}, std::size_t{48}, std::size_t{200}, std::size_t{1000},
                                std::size_t{100'000}}) {
        const al::request r{n, nullptr, 0};
        std::vector<void*> ps;
        for (int i = 0; i < 3000; ++i) {
            ps.push_back(h.allocate(r));
            std::memset(ps.back(), 0x5A, n);
            if (n > 10'000 && i == 20) break;   // large blocks go to the source; a few suffice
        }
        // Keep every third block, give the rest back as one shuffled run
        // (with a null entry, which is skipped).
        std::vector<void*> keep, run;
        for (std::size_t i = 0; i < ps.size(); ++i) (i % 3 == 0 ? keep : run).push_back(ps[i]);
        std::shuffle(run.begin(), run.end(), rng);
        run.insert(run.begin() + static_cast<long>(run.size() / 2), nullptr);
        const std::size_t held = h.source().bytes();
        h.deallocate_run(run.data(), run.size(), r);
        // The kept blocks are untouched.
        for (void* p : keep)
            for (std::size_t k = 0; k < n; k += 7) REQUIRE(static_cast<unsigned char*>(p)[k] == 0x5A);
        // As many allocations as were freed reuse exactly those chunks.
        if (n <= 10'000) {
            const std::set<void*> freed(run.begin(), run.end());
            std::size_t reused = 0;
            std::vector<void*> again;
            for (std::size_t i = 0; i + 1 < run.size(); ++i) {
                again.push_back(h.allocate(r));
                reused += freed.count(again.back());
            }
            // Fresh chunks left in the last refill span may be taken too; the
            // heap must not need more memory, and the freed chunks are found.
            INFO("reused " << reused << " of " << run.size() - 1);
            CHECK(reused + 512 >= run.size() - 1);
            CHECK(h.source().bytes() == held);
            for (void* p : again) h.deallocate(p, r);
        } else {
            // Large blocks left the heap for the back end's cache of free pages
            // (retained up to heap_config::retain_bytes: 4 MiB by default).
            CHECK(h.stats().large_blocks == keep.size());
            CHECK(h.stats().free_bytes >= (run.size() - 1) * n);
            CHECK(h.source().bytes() <= held);
        }
        for (void* p : keep) h.deallocate(p, r);
    }
    h.deallocate_all();
    CHECK(h.source().bytes() == 0);
}

TEST_CASE("deallocate_run keeps the placement rule: chunks return to their own classes", "[deallocate_run]") {
    al::velox_heap<counted> h;
    const al::request r{32, nullptr, 0};
    std::vector<void*> ps;
    for (int i = 0; i < 20000; ++i) ps.push_back(h.allocate(r));
    // Free a sorted run covering a few vicinities, then ask near each freed one.
    std::vector<void*> run(ps.begin() + 1000, ps.begin() + 5000);
    h.deallocate_run(run.data(), run.size(), r);
    const std::set<void*> freed(run.begin(), run.end());
    std::size_t same = 0;
    for (std::size_t i = 0; i < run.size(); i += 97) {
        void* p = h.allocate(al::request{32, run[i], 0});
        same += (reinterpret_cast<std::uintptr_t>(p) >> 16) == (reinterpret_cast<std::uintptr_t>(run[i]) >> 16);
        CHECK(freed.count(p) == 1);
    }
    CHECK(same == (run.size() + 96) / 97);
}

namespace {

// A partition's root over 2^28-aligned memory (Medius' classes alias every
// 2^28 bytes), as a heap holds it.
template <class P>
struct root {
    static constexpr std::size_t alignment = std::size_t{1} << 28;
    static constexpr std::size_t bytes = std::size_t{1} << 20;
    void* reserved = nullptr;
    std::byte* base = nullptr;
    union {
        typename P::header_type h;
    };
    root() {
        reserved = ::mmap(nullptr, 2 * alignment, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                          -1, 0);
        REQUIRE(reserved != MAP_FAILED);
        base = reinterpret_cast<std::byte*>((reinterpret_cast<std::uintptr_t>(reserved) + alignment - 1) &
                                            ~(alignment - 1));
        P::init(h);
        REQUIRE(P::prepare(h, base, bytes));
    }
    ~root() {
        P::destroy(h);
        ::munmap(reserved, 2 * alignment);
    }
    root(const root&) = delete;
    root& operator=(const root&) = delete;
};

// Two roots that were given the same chunks [start, start + count * n) take
// the same hinted and unhinted requests and frees (ops of them) and must place
// every one on the same offset; each block carries a stamp checked when it is
// freed. At the end what is left comes out in the same order, every chunk once.
template <class P>
void same_placements(root<P>& a, root<P>& b, std::size_t n, std::size_t start, std::size_t count, std::size_t ops,
                     std::mt19937_64& rng) {
    std::map<std::size_t, std::uint64_t> live;   // offset -> stamp
    std::vector<std::size_t> live_list;
    auto take = [&](const void* hint_a, const void* hint_b) {
        std::byte* pa = P::allocate(a.h, al::request{n, hint_a, 0});
        std::byte* pb = P::allocate(b.h, al::request{n, hint_b, 0});
        REQUIRE((pa == nullptr) == (pb == nullptr));
        if (!pa) return false;
        const auto off = static_cast<std::size_t>(pa - a.base);
        REQUIRE(off == static_cast<std::size_t>(pb - b.base));
        REQUIRE(off >= start);
        REQUIRE(off < start + count * n);
        REQUIRE((off - start) % n == 0);
        REQUIRE(live.count(off) == 0);
        const std::uint64_t stamp = rng();
        std::memcpy(pa, &stamp, sizeof stamp);
        std::memcpy(pa + n - sizeof stamp, &stamp, sizeof stamp);
        live[off] = stamp;
        live_list.push_back(off);
        return true;
    };
    for (std::size_t op = 0; op < ops; ++op) {
        if (live_list.empty() || rng() % 5 < 3) {
            // A hint anywhere in the chunks (or none): the same class's chunk in both.
            const std::size_t at = start + (rng() % count) * n;
            const bool hinted = rng() % 3 != 0;
            take(hinted ? a.base + at : nullptr, hinted ? b.base + at : nullptr);
        } else {
            const std::size_t i = rng() % live_list.size();
            const std::size_t off = live_list[i];
            live_list[i] = live_list.back();
            live_list.pop_back();
            std::uint64_t head = 0, tail = 0;
            std::memcpy(&head, a.base + off, sizeof head);
            std::memcpy(&tail, a.base + off + n - sizeof tail, sizeof tail);
            REQUIRE(head == live[off]);
            REQUIRE(tail == live[off]);
            live.erase(off);
            P::deallocate(a.h, a.base + off, n);
            P::deallocate(b.h, b.base + off, n);
        }
    }
    while (take(nullptr, nullptr)) {
    }
    CHECK(live.size() == count);
    for (const auto& [off, stamp] : live) {
        std::uint64_t head = 0;
        std::memcpy(&head, a.base + off, sizeof head);
        CHECK(head == stamp);
    }
}

template <class P>
void range_places_as_single_frees(std::size_t n, std::size_t start, std::size_t count, unsigned seed) {
    if (n < P::min_chunk) return;   // a heap rounds sizes up to it
    INFO("chunk " << n << ", start " << start << ", count " << count);
    root<P> a, b;   // a: one range; b: one free a chunk, the highest first
    al::deallocate_range_in<P>(a.h, a.base + start, count, n);
    for (std::size_t j = count; j-- > 0;) P::deallocate(b.h, b.base + start + j * n, n);
    std::mt19937_64 rng(seed);
    same_placements(a, b, n, start, count, 3 * count, rng);
}

} // namespace

TEMPLATE_TEST_CASE("deallocate_range places as frees one by one from the highest", "[deallocate_run][range]",
                   al::segregated_partition<>, al::quickfit_partition<>, al::kingsley_partition,
                   al::velox_classed_partition<>, al::medius_classed_partition<>,
                   al::malloc_declarations::medius::partition, al::velox_partition<>) {
    // Starts below a 64 KiB boundary and off the page grid, so that ranges
    // cross vicinities and pages (a chunk's class is its start's).
    const std::size_t vicinity = std::size_t{1} << 16;
    unsigned seed = 7;
    for (const std::size_t n : {std::size_t{16}, std::size_t{64}, std::size_t{256}, std::size_t{1024}})
        for (const std::size_t start : {3 * vicinity - 5 * n - 16, 5 * vicinity + 48, 4096 + 2 * n})
            for (const std::size_t count : {std::size_t{1}, std::size_t{2}, std::size_t{127}, 200'000 / n})
                range_places_as_single_frees<TestType>(n, start, count, ++seed);
}

TEST_CASE("same_class_tail: one size, aligned address blocks, or each chunk asked", "[deallocate_run][range]") {
    alignas(64) static std::byte mem[4096];
    const std::size_t n = 48;
    // Sizes: every chunk is one class.
    CHECK(al::same_class_tail<al::size>(mem, 10, n, [](std::byte*) { return 0; }) == 10);
    // 64 KiB vicinities: chunks from the last one's block start on.
    std::byte* const p = reinterpret_cast<std::byte*>(std::uintptr_t{0x7f0000010000} - 5 * n);
    CHECK(al::same_class_tail<al::vicinity<16>>(p, 12, n, [](std::byte*) { return 0; }) == 7);
    CHECK(al::same_class_tail<al::vicinity<16>>(p, 5, n, [](std::byte*) { return 0; }) == 5);
    // Any other attribute: each chunk's key, from the top down.
    struct no_blocks {};   // not a size, no aligned classes
    CHECK(al::same_class_tail<no_blocks>(mem, 6, 16, [](std::byte* c) { return (c - mem) / 32; }) == 2);
}

TEST_CASE("a range into a page whose empty stack another size held drops that size's front", "[deallocate_run][range]") {
    // One tagged stack a page: the range's size claims the stack that 64 B
    // chunks emptied, and the 64 B front that still named it must go, or the
    // next 64 B request would pop a 128 B chunk (both range frees did that
    // before the fronts were checked after the claim).
    using P = al::medius_classed_partition<12, 16, 1>;
    const bool as_run = GENERATE(false, true);
    root<P> t;
    std::byte* const page = t.base + 8 * 4096;
    P::deallocate(t.h, page, 64);
    REQUIRE(P::allocate(t.h, al::request{64, page, 0}) == page);
    if (as_run) {
        std::byte* const run[] = {page + 512, page + 640, page + 768, page + 896};
        al::deallocate_run_in<P>(t.h, run, 4, 128);
    } else {
        al::deallocate_range_in<P>(t.h, page + 512, 4, 128);
    }
    CHECK(P::allocate(t.h, al::request{64, page, 0}) == nullptr);
    CHECK(P::allocate(t.h, al::request{64, nullptr, 0}) == nullptr);
    for (std::size_t j = 0; j < 4; ++j) CHECK(P::allocate(t.h, al::request{128, page, 0}) == page + 512 + j * 128);
    CHECK(P::allocate(t.h, al::request{128, nullptr, 0}) == nullptr);
}

namespace {

// A table of sizes whose directory has stopped vouching (it could not map a
// leaf: size_directory's defined answer to the system refusing memory) walks
// its classes instead, and must place exactly as one whose directory sees:
// the rule is the predicate's, the directory only a shortcut to it.
template <class P>
void blind_directory_places_as_seeing(std::size_t n, unsigned seed) {
    INFO("chunk " << n << ", seed " << seed);
    root<P> a, b;   // a's directory sees; b's stops vouching
    // One note in each of 257 leaves, its most, for classes that hold nothing
    // (a superset of bits is allowed: each costs a failed look).
    for (std::size_t l = 0; l <= 256; ++l) b.h.sizes.note(n, l << 12);
    REQUIRE(a.h.sizes.vouches(n));
    REQUIRE_FALSE(b.h.sizes.vouches(n));

    std::mt19937_64 rng(seed);
    const std::size_t count = std::min<std::size_t>(root<P>::bytes / n, 2048);
    std::vector<std::size_t> free_list(count);   // chunk indexes, freed in random order
    for (std::size_t j = 0; j < count; ++j) free_list[j] = j;
    std::shuffle(free_list.begin(), free_list.end(), rng);
    for (const std::size_t j : free_list) {
        P::deallocate(a.h, a.base + j * n, n);
        P::deallocate(b.h, b.base + j * n, n);
    }
    same_placements(a, b, n, 0, count, 4 * count, rng);
}

} // namespace

TEMPLATE_TEST_CASE("a table of sizes whose directory stops vouching places as one that sees", "[deallocate_run][size_directory]",
                   al::velox_classed_partition<>, al::malloc_declarations::velox::partition) {
    unsigned seed = 11;
    for (const std::size_t n : {std::size_t{16}, std::size_t{64}, std::size_t{640}, std::size_t{4096}})
        blind_directory_places_as_seeing<TestType>(n, ++seed);
}
