// heap::deallocate_run: a run of same-sized blocks back in one pass, threaded
// through hash_table, list and rb_tree levels (one class lookup per run of
// consecutive same-class chunks). Every partition shape the library ships.
#include "catch.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include <allotheque/allocators/defero.hpp>
#include <allotheque/allocators/kingsley.hpp>
#include <allotheque/allocators/medius.hpp>
#include <allotheque/allocators/quickfit.hpp>
#include <allotheque/allocators/velox.hpp>
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
