// Allocation patterns shared by the micro-benchmarks. Each runs `batch`
// allocate/free pairs per benchmark iteration through a raw policy
// (allocate(n, hint) / deallocate(p, n)); the hint is always the previous
// allocation ("near the previous one"), which the malloc and pmr baselines
// ignore. The counter ns_per_pair is nanoseconds per allocate/free pair (the
// console prints it with an "s" suffix; the unit is nevertheless ns).
//
//   lifo   allocate `batch` objects, free them in reverse order
//   random allocate `batch` objects, free them in a fixed random order; the
//          next iteration's allocations then walk the scrambled free lists
//   churn  steady state: `batch` objects stay live; each step frees a random
//          one and allocates its replacement
#pragma once
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

namespace bench::micro {

inline constexpr std::size_t batch = 100'000;

inline const std::vector<std::uint32_t>& random_order() {
    static const std::vector<std::uint32_t> order = [] {
        std::vector<std::uint32_t> v(batch);
        std::iota(v.begin(), v.end(), 0u);
        std::shuffle(v.begin(), v.end(), std::mt19937_64(42));
        return v;
    }();
    return order;
}

inline const std::vector<std::uint32_t>& random_slots() {
    static const std::vector<std::uint32_t> slots = [] {
        std::vector<std::uint32_t> v(batch);
        std::mt19937_64 rng(7);
        std::uniform_int_distribution<std::uint32_t> d(0, batch - 1);
        for (auto& x : v) x = d(rng);
        return v;
    }();
    return slots;
}

inline void set_pairs(benchmark::State& st, std::size_t pairs_per_iteration) {
    st.counters["ns_per_pair"] = benchmark::Counter(static_cast<double>(pairs_per_iteration) * 1e-9,
                                                    benchmark::Counter::kIsIterationInvariantRate |
                                                        benchmark::Counter::kInvert);
    st.SetItemsProcessed(static_cast<std::int64_t>(st.iterations() * pairs_per_iteration));
}

// Forced inline: it is part of each pattern's loop, and a call here would
// cost the heaps whose allocate is inlined more than their own fast path.
template <class P>
[[gnu::always_inline]] inline void* touch(P& p, std::size_t n, const void* hint) {
    void* q = p.allocate(n, hint);
    *static_cast<unsigned char*>(q) = 1;   // the object is used, as a program would
    return q;
}

template <class P>
void lifo(benchmark::State& st, P& p) {
    const auto n = static_cast<std::size_t>(st.range(0));
    std::vector<void*> v(batch);
    for (auto _ : st) {
        const void* last = nullptr;
        for (std::size_t i = 0; i < batch; ++i) last = v[i] = touch(p, n, last);
        for (std::size_t i = batch; i-- > 0;) p.deallocate(v[i], n);
        benchmark::ClobberMemory();
    }
    set_pairs(st, batch);
}

template <class P>
void random_free(benchmark::State& st, P& p) {
    const auto n = static_cast<std::size_t>(st.range(0));
    const auto& order = random_order();
    std::vector<void*> v(batch);
    for (auto _ : st) {
        const void* last = nullptr;
        for (std::size_t i = 0; i < batch; ++i) last = v[i] = touch(p, n, last);
        for (std::size_t i = 0; i < batch; ++i) p.deallocate(v[order[i]], n);
        benchmark::ClobberMemory();
    }
    set_pairs(st, batch);
}

template <class P>
void churn(benchmark::State& st, P& p) {
    const auto n = static_cast<std::size_t>(st.range(0));
    const auto& slots = random_slots();
    std::vector<void*> v(batch);
    const void* last = nullptr;
    for (std::size_t i = 0; i < batch; ++i) last = v[i] = touch(p, n, last);
    for (auto _ : st) {
        for (std::size_t i = 0; i < batch; ++i) {
            void*& s = v[slots[i]];
            p.deallocate(s, n);
            // Without this, an allocator whose calls inline entirely can have
            // its free-then-allocate of one size folded into nothing: allocator
            // calls are opaque in real programs.
            benchmark::ClobberMemory();
            last = s = touch(p, n, last);
        }
        benchmark::ClobberMemory();
    }
    for (void* q : v) p.deallocate(q, n);
    set_pairs(st, batch);
}

} // namespace bench::micro
