// What AddressSanitizer sees inside the heaps (detail/poison.hpp): built with
// ASan (the dev presets), a block is addressable up to the size asked for, the
// rest of its chunk and a freed chunk past its link words are poisoned, so an
// overrun or a write after free in user code is reported. And no false
// report: random operation sequences over every exact-size heap, with the
// contents of every live block written and checked, run clean under ASan
// (resizes, runs of frees, sweeps, large blocks, remote frees between threads).
// Valgrind's side is tests/memcheck (built without ASan, run under memcheck).
#include "catch.hpp"
#include "in_child.hpp"

#include <allotheque/allocators/defero.hpp>
#include <allotheque/allocators/kingsley.hpp>
#include <allotheque/allocators/kingsley_coalescing.hpp>
#include <allotheque/allocators/lea.hpp>
#include <allotheque/allocators/medius.hpp>
#include <allotheque/allocators/quickfit.hpp>
#include <allotheque/allocators/segregated.hpp>
#include <allotheque/allocators/velox.hpp>
#include <allotheque/detail/poison.hpp>
#include <allotheque/heap.hpp>
#include <allotheque/layers/per_thread.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace al = allotheque;

namespace {

using marked_segregated = al::heap<al::segregated_partition<>, al::arena_source,
                                   al::configured<al::heap_config{.free_marks = true}>>;

struct block {
    void* p;
    std::size_t n;
    unsigned char seed;
};

void fill(const block& b) { std::memset(b.p, b.seed, b.n); }
bool intact(const block& b) {
    const auto* c = static_cast<const unsigned char*>(b.p);
    for (std::size_t i = 0; i < b.n; ++i)
        if (c[i] != b.seed) return false;
    return true;
}

// Random allocate / free / resize / run-of-frees / trim over one heap, every
// live block's contents written in full and checked before it goes.
template <class H>
void random_operations(H& h, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<block> live;
    auto size = [&] {
        const unsigned k = rng() % 100;
        if (k < 80) return std::size_t{1} + rng() % 300;
        if (k < 97) return std::size_t{300} + rng() % 4000;
        return std::size_t{40000} + rng() % 300000;   // large blocks
    };
    for (int step = 0; step < 6000; ++step) {
        const unsigned op = rng() % 16;
        if (op < 8 || live.empty()) {
            block b{nullptr, size(), static_cast<unsigned char>(rng())};
            const bool zero = rng() % 8 == 0;
            b.p = h.try_allocate(al::request{.size = b.n, .zero = zero});
            REQUIRE(b.p);
            if (zero) REQUIRE(intact(block{b.p, b.n, 0}));
            fill(b);
            live.push_back(b);
        } else if (op < 13) {
            const std::size_t i = rng() % live.size();
            REQUIRE(intact(live[i]));
            h.deallocate(live[i].p, al::request{.size = live[i].n});
            live[i] = live.back();
            live.pop_back();
        } else if (op < 15) {
            block& b = live[rng() % live.size()];
            const std::size_t n = b.n + rng() % 64 - std::min<std::size_t>(b.n - 1, 32);
            bool resized = false;
            if constexpr (requires { h.try_resize(b.p, al::request{}, n); })
                resized = h.try_resize(b.p, al::request{.size = b.n}, n);
            else
                resized = h.try_resize(b.p, n);
            if (resized) {
                REQUIRE(intact(block{b.p, std::min(b.n, n), b.seed}));
                b.n = n;
                fill(b);
            }
        } else {
            // A run of same-size frees, then give everything free back.
            const std::size_t n = 1 + rng() % 200;
            std::vector<void*> run;
            for (int i = 0; i < 50; ++i) {
                void* p = h.try_allocate(al::request{.size = n});
                REQUIRE(p);
                std::memset(p, 0x5a, n);
                run.push_back(p);
            }
            if constexpr (requires { h.deallocate_run(run.data(), run.size(), al::request{}); })
                h.deallocate_run(run.data(), run.size(), al::request{.size = n});
            else
                for (void* p : run) h.deallocate(p, al::request{.size = n});
            h.trim();
        }
    }
    for (const block& b : live) {
        REQUIRE(intact(b));
        h.deallocate(b.p, al::request{.size = b.n});
    }
}

} // namespace

#if defined(ALLOTHEQUE_POISON_ASAN)

TEMPLATE_TEST_CASE("ASan: a block is addressable up to its size, the rest of its chunk is not", "[asan]",
                   al::segregated_heap<>, al::quickfit_heap<>, al::kingsley_heap<>, al::velox_heap<>,
                   al::medius_heap<>, marked_segregated) {
    STATIC_REQUIRE(al::detail::poison::enabled);
    TestType h;
    const std::size_t n = 20, chunk = TestType::good_size(n);
    REQUIRE(chunk > n);
    auto* p = static_cast<unsigned char*>(h.try_allocate(al::request{.size = n}));
    REQUIRE(p);
    CHECK(__asan_region_is_poisoned(p, n) == nullptr);
    for (std::size_t i = n; i < chunk; ++i) CHECK(__asan_address_is_poisoned(p + i));
    // Grown in place inside the chunk: the new bytes open, the rest stays shut.
    REQUIRE(h.try_resize(p, al::request{.size = n}, n + 2));
    CHECK(__asan_region_is_poisoned(p, n + 2) == nullptr);
    CHECK(__asan_address_is_poisoned(p + n + 2));

    // Freed: shut past the words the partition threads through free chunks.
    auto* q = static_cast<unsigned char*>(h.try_allocate(al::request{.size = 200}));
    const std::size_t qchunk = TestType::good_size(200);
    REQUIRE(q);
    std::memset(q, 1, 200);
    h.deallocate(q, al::request{.size = 200});
    std::size_t open = 0;
    while (open < qchunk && !__asan_address_is_poisoned(q + open)) ++open;
    CHECK(open <= 48);   // the links (and the double-free mark): a few words
    for (std::size_t i = open; i < qchunk; ++i) CHECK(__asan_address_is_poisoned(q + i));
    // Allocated again: open again, whatever the free chunk held.
    auto* r = static_cast<unsigned char*>(h.try_allocate(al::request{.size = 200}));
    REQUIRE(r == q);
    CHECK(__asan_region_is_poisoned(r, 200) == nullptr);
    h.deallocate(r, al::request{.size = 200});
    h.deallocate(p, al::request{.size = n + 2});
}

TEST_CASE("ASan: a block of a splitting heap is addressable up to its size", "[asan]") {
    // block_heap poisons the tail of a block in use (up to the next block's
    // tag); its free blocks stay open, since splits and merges write tags
    // anywhere inside them.
    al::lea_heap<> h;
    auto* p = static_cast<unsigned char*>(h.try_allocate(al::request{.size = 20}));
    REQUIRE(p);
    const std::size_t usable = h.usable_size(p);
    REQUIRE(usable > 20);
    CHECK(__asan_region_is_poisoned(p, 20) == nullptr);
    for (std::size_t i = 20; i < usable; ++i) CHECK(__asan_address_is_poisoned(p + i));
    REQUIRE(h.try_resize(p, usable));
    CHECK(__asan_region_is_poisoned(p, usable) == nullptr);
    h.deallocate(p);
    auto* big = static_cast<unsigned char*>(h.try_allocate(al::request{.size = 1 << 20}));
    REQUIRE(big);
    CHECK(__asan_address_is_poisoned(big + (1 << 20)));
    h.deallocate(big);
}

TEST_CASE("ASan reports a user's overrun and write after free inside a heap", "[asan]") {
    using allotheque_test::in_child;
    auto overrun = in_child([] {
        static al::segregated_heap<> h;
        auto* p = static_cast<char*>(h.try_allocate(al::request{.size = 24}));
        p[24 + 7] = 1;   // 8 bytes past a 24-byte block
    });
    CHECK(overrun.second.find("AddressSanitizer: use-after-poison") != std::string::npos);
    CHECK(overrun.second.find("WRITE of size 1") != std::string::npos);

    auto after_free = in_child([] {
        static al::medius_heap<> h;
        auto* p = static_cast<char*>(h.try_allocate(al::request{.size = 100}));
        h.deallocate(p, al::request{.size = 100});
        p[64] = 1;
    });
    CHECK(after_free.second.find("AddressSanitizer: use-after-poison") != std::string::npos);

    auto large = in_child([] {
        static al::segregated_heap<> h;
        auto* p = static_cast<char*>(h.try_allocate(al::request{.size = 1 << 20}));
        h.deallocate(p, al::request{.size = 1 << 20});
        p[4096] = 1;   // a large block given back keeps its pages shut until reused
    });
    CHECK(large.second.find("AddressSanitizer") != std::string::npos);
}

#endif

// These run in every build; under ASan any false report fails them.
TEMPLATE_TEST_CASE("random operations run clean under a memory checker", "[asan]", al::segregated_heap<>,
                   al::quickfit_heap<>, al::kingsley_heap<>, al::velox_heap<>, al::medius_heap<>, marked_segregated,
                   al::defero_heap<>, al::lea_heap<>, al::lea_deferred_heap<>, al::kingsley_coalescing_heap<>) {
    TestType h;
    random_operations(h, 7);
    random_operations(h, 8);   // the same heap again: memory from the first run is reused
}

TEST_CASE("remote frees of small blocks run clean under a memory checker", "[asan][threads]") {
    // A remote free writes its link into the block before the owner takes it
    // back: the 1-byte blocks' tails are poisoned until then.
    al::layers::per_thread<al::segregated_heap<>> h;
    std::vector<void*> blocks;
    for (int i = 0; i < 2000; ++i) {
        void* p = h.allocate(al::request{.size = 1 + static_cast<std::size_t>(i % 3)});
        static_cast<char*>(p)[0] = 1;
        blocks.push_back(p);
    }
    std::thread t([&] {
        for (std::size_t i = 0; i < blocks.size(); ++i) h.deallocate(blocks[i], al::request{.size = 1 + i % 3});
    });
    t.join();
    for (int i = 0; i < 2000; ++i) {
        auto* p = static_cast<char*>(h.allocate(al::request{.size = 3}));
        p[0] = p[1] = p[2] = 2;
        h.deallocate(p, al::request{.size = 3});
    }
}
