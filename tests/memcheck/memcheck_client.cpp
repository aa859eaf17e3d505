// Run under valgrind by tests/memcheck/CMakeLists.txt. `clean`: random
// allocations and frees over the exact-size heaps, every byte of every live
// block written and read, must give memcheck nothing to report. `overrun` and
// `after-free` each make one mistake memcheck must name.
#include <allotheque/allocators/kingsley.hpp>
#include <allotheque/allocators/medius.hpp>
#include <allotheque/allocators/segregated.hpp>
#include <allotheque/allocators/velox.hpp>
#include <allotheque/heap.hpp>

#include <cstdio>
#include <cstring>
#include <random>
#include <string_view>
#include <vector>

namespace al = allotheque;

namespace {

template <class H>
int clean_run(unsigned seed) {
    H h;
    std::mt19937 rng(seed);
    struct block {
        unsigned char* p;
        std::size_t n;
    };
    std::vector<block> live;
    int bad = 0;
    for (int step = 0; step < 4000; ++step) {
        if (live.empty() || rng() % 3 != 0) {
            const std::size_t n = rng() % 8 == 0 ? 5000 + rng() % 100000 : 1 + rng() % 400;
            const bool zero = rng() % 4 == 0;
            auto* p = static_cast<unsigned char*>(h.try_allocate(al::request{.size = n, .zero = zero}));
            if (!p) return 1;
            if (zero)
                for (std::size_t i = 0; i < n; ++i) bad += p[i] != 0;   // read: must count as written
            std::memset(p, static_cast<int>(n & 0xff), n);
            live.push_back({p, n});
        } else {
            const std::size_t i = rng() % live.size();
            for (std::size_t k = 0; k < live[i].n; ++k) bad += live[i].p[k] != (live[i].n & 0xff);
            h.deallocate(live[i].p, al::request{.size = live[i].n});
            live[i] = live.back();
            live.pop_back();
        }
        if (step % 1000 == 999) h.trim();
    }
    for (const block& b : live) h.deallocate(b.p, al::request{.size = b.n});
    return bad;
}

} // namespace

int main(int argc, char** argv) {
    const std::string_view what = argc > 1 ? argv[1] : "clean";
    if (what == "clean") {
        const int bad = clean_run<al::segregated_heap<>>(1) + clean_run<al::kingsley_heap<>>(2) +
                        clean_run<al::velox_heap<>>(3) + clean_run<al::medius_heap<>>(4);
        std::printf("%d bad bytes\n", bad);
        return bad ? 1 : 0;
    }
    static al::segregated_heap<> h;
    if (what == "overrun") {
        auto* p = static_cast<volatile char*>(h.try_allocate(al::request{.size = 20}));
        p[20] = 1;
        return 0;
    }
    if (what == "after-free") {
        auto* p = static_cast<volatile char*>(h.try_allocate(al::request{.size = 100}));
        h.deallocate(const_cast<char*>(p), al::request{.size = 100});
        p[64] = 1;
        return 0;
    }
    return 2;
}
