// The cliff of issue 16 item 7: a first fit that walks a bin of blocks too small
// for the request. Two set-ups, then the timed loop is one malloc/free pair of
// the request size (ns per pair = the reported time; the freed block merges
// back where it came from, so every iteration sees the same heap):
//   too_small/<n>  n free blocks of 1,040 bytes (kept apart by live 32-byte
//                  guards, so they cannot merge) in the Lea bin [1024, 1280);
//                  the request, 1,200 bytes, falls in the same bin
//   holes/<n>      n blocks of 600 bytes allocated, every other one freed
//                  (n/2 holes in the bin [512, 640)); the request, 610 bytes (a 624-byte block),
//                  falls in the same bin and fits no hole
// against the system malloc (glibc, or whatever LD_PRELOAD puts there). With
// n = 2^20 holes/ holds about 640 MB while it runs.
//   bin_walk --benchmark_filter=holes/lea/1048576
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "common/policies.hpp"

namespace {

using namespace bench;

template <class P>
void* take(P& p, std::size_t n) {
    void* q = p.allocate(n, nullptr);
    std::memset(q, 1, 16);   // used, as a program would
    return q;
}

template <class P>
void timed_pairs(benchmark::State& st, P& p, std::size_t want) {
    for (auto _ : st) {
        void* q = take(p, want);
        benchmark::DoNotOptimize(q);
        p.deallocate(q, want);
    }
}

template <class P>
void too_small(benchmark::State& st) {
    P p;
    const auto n = static_cast<std::size_t>(st.range(0));
    constexpr std::size_t small = 1040, guard = 32, want = 1200;
    std::vector<void*> blocks(n), guards(n);
    for (std::size_t i = 0; i < n; ++i) {
        blocks[i] = take(p, small);
        guards[i] = take(p, guard);
    }
    for (void* b : blocks) p.deallocate(b, small);
    timed_pairs(st, p, want);
    for (void* g : guards) p.deallocate(g, guard);
}

template <class P>
void holes(benchmark::State& st) {
    P p;
    const auto n = static_cast<std::size_t>(st.range(0));
    constexpr std::size_t size = 600, want = 610;
    std::vector<void*> blocks(n);
    for (auto& b : blocks) b = take(p, size);
    for (std::size_t i = 0; i < n; i += 2) p.deallocate(blocks[i], size);
    timed_pairs(st, p, want);
    for (std::size_t i = 1; i < n; i += 2) p.deallocate(blocks[i], size);
}

#define ALLOTHEQUE_BIN_WALK(P, label)                                                                  \
    BENCHMARK(too_small<P>)->Name("too_small/" label)->Arg(1000)->Arg(100000);                         \
    BENCHMARK(holes<P>)->Name("holes/" label)->Arg(1 << 16)->Arg(1 << 20)->Iterations(2000)

ALLOTHEQUE_BIN_WALK(raw::malloc_policy, "malloc");
ALLOTHEQUE_BIN_WALK(raw::lea_policy, "lea");
ALLOTHEQUE_BIN_WALK(raw::lea_deferred_policy, "lea_deferred");

} // namespace
