// sparse_index (Velox's class table over 2^31 vicinities): how long "lowest
// non-empty class" (first) and "next non-empty class" (next) take with 1, 100
// and 10,000 non-empty classes spread at random over the whole 2^31 range.
// The claim under test: near-constant time, a few count-trailing-zeros per
// bitmap level, whatever the number and spread of non-empty classes.
//
//   first/N        first() with N non-empty classes
//   first_top/1    one non-empty class, the highest one (worst case of the scan)
//   next_walk/N    next() stepping through all N non-empty classes (per step)
//   next_random/N  next(i) from a random class i (per call)
//   obtain_release toggling one class between empty and non-empty
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include <allotheque/containers/class_index.hpp>

namespace {

struct header {
    std::uint8_t touched;
};
struct init_header {
    void operator()(header& h) const noexcept { h.touched = 1; }
};
using index_type = allotheque::sparse_index<31, header, init_header>;
constexpr std::size_t classes = index_type::classes;

std::unique_ptr<index_type> make(std::size_t nonempty, std::vector<std::size_t>* chosen = nullptr) {
    auto ix = std::make_unique<index_type>();
    std::mt19937_64 rng(2024);
    for (std::size_t k = 0; k < nonempty; ++k) {
        const std::size_t i = rng() % classes;
        ix->prepare(i, i);
        ix->obtain(i);
        if (chosen) chosen->push_back(i);
    }
    return ix;
}

void first(benchmark::State& st) {
    auto ix = make(static_cast<std::size_t>(st.range(0)));
    for (auto _ : st) benchmark::DoNotOptimize(ix->first());
}
BENCHMARK(first)->Arg(1)->Arg(100)->Arg(10'000);

void first_top(benchmark::State& st) {
    auto ix = std::make_unique<index_type>();
    ix->prepare(classes - 1, classes - 1);
    ix->obtain(classes - 1);
    for (auto _ : st) benchmark::DoNotOptimize(ix->first());
}
BENCHMARK(first_top);

void next_walk(benchmark::State& st) {
    auto ix = make(static_cast<std::size_t>(st.range(0)));
    std::size_t steps = 0;
    for (auto _ : st) {
        for (std::size_t i = ix->first(); i != allotheque::npos; i = ix->next(i)) {
            benchmark::DoNotOptimize(i);
            ++steps;
        }
    }
    st.SetItemsProcessed(static_cast<std::int64_t>(steps));
}
BENCHMARK(next_walk)->Arg(1)->Arg(100)->Arg(10'000);

void next_random(benchmark::State& st) {
    auto ix = make(static_cast<std::size_t>(st.range(0)));
    std::vector<std::size_t> from(4096);
    std::mt19937_64 rng(7);
    for (auto& f : from) f = rng() % classes;
    std::size_t k = 0;
    for (auto _ : st) benchmark::DoNotOptimize(ix->next(from[k++ & 4095]));
}
BENCHMARK(next_random)->Arg(1)->Arg(100)->Arg(10'000);

void obtain_release(benchmark::State& st) {
    std::vector<std::size_t> chosen;
    auto ix = make(100, &chosen);
    const std::size_t i = chosen[50] ^ 1;   // a neighbour of a non-empty class
    ix->prepare(i, i);
    for (auto _ : st) {
        benchmark::DoNotOptimize(&ix->obtain(i));
        ix->release(i);
    }
}
BENCHMARK(obtain_release);

} // namespace
