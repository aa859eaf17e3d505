// The two ways to give an exact-size heap a malloc interface (free(p) without a
// size), against each other, against lea_heap (boundary tags: no layer needed)
// and against the system malloc:
//   sized<H>     a 16-byte header before every block holds the request size
//   page_map<H>  no header: the back end's page map (backend/page_map.hpp)
//                maps each page to its span, and the span says its chunk size
// Benchmarks (ns per malloc/free pair = the reported time per iteration):
//   BM_pair/<size>     malloc(size) then free, one block live: the fast path
//   BM_batch/<max>     10^4 blocks of random size in [1, max], freed in random
//                      order: paths with class searches and refills
// Counters of BM_batch (memory, taken with all blocks live):
//   os_per_live   bytes held from the system / bytes requested  (1.0 = ideal)
//   meta_KiB      the process page map's resident table (mincore; shared by
//                 every heap of the process, so the same for all)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include <allotheque/allocators/lea.hpp>
#include <allotheque/allocators/medius.hpp>
#include <allotheque/allocators/velox.hpp>
#include <allotheque/backend/page_map.hpp>
#include <allotheque/layers/page_map.hpp>
#include <allotheque/layers/sized.hpp>
#include <allotheque/sources/mmap_source.hpp>

namespace {

namespace at = allotheque;
using page_opts = at::heap_options<at::detail::page_size, 64 * 1024, 64 * 1024, 4 * 1024 * 1024>;

template <class H>
struct sized_m {
    at::layers::sized<H, true> m;
    void* allocate(std::size_t n) noexcept { return m.allocate(n); }
    void deallocate(void* p) noexcept { m.deallocate(p); }
    std::size_t os_bytes() const noexcept { return m.parent().stats().os_bytes; }
    std::size_t meta() const noexcept { return 0; }
};
template <class H>
struct page_map_m {
    at::layers::page_map<H, true> m;
    void* allocate(std::size_t n) noexcept { return m.allocate(n); }
    void deallocate(void* p) noexcept { m.deallocate(p); }
    std::size_t os_bytes() const noexcept { return m.parent().stats().os_bytes; }
    std::size_t meta() const noexcept { return at::backend::page_map::instance().resident_bytes(); }
};
struct lea_m {
    at::lea_heap<at::mmap_source> h;
    void* allocate(std::size_t n) noexcept { return h.try_allocate(at::request{n, nullptr, 0}); }
    void deallocate(void* p) noexcept { h.deallocate(p); }
    std::size_t os_bytes() const noexcept { return h.stats().os_bytes; }
    std::size_t meta() const noexcept { return 0; }
};
struct system_m {
    void* allocate(std::size_t n) noexcept { return std::malloc(n); }
    void deallocate(void* p) noexcept { std::free(p); }
    std::size_t os_bytes() const noexcept { return 0; }   // not observable
    std::size_t meta() const noexcept { return 0; }
};

using sized_velox = sized_m<at::velox_heap<at::mmap_source>>;
using page_map_velox = page_map_m<at::velox_heap<at::mmap_source, page_opts>>;
using sized_medius = sized_m<at::medius_heap<at::mmap_source>>;
using page_map_medius = page_map_m<at::medius_heap<at::mmap_source, page_opts>>;

template <class M>
void BM_pair(benchmark::State& state) {
    auto* m = new M();
    const auto n = static_cast<std::size_t>(state.range(0));
    for (auto _ : state) {
        void* p = m->allocate(n);
        benchmark::DoNotOptimize(p);
        m->deallocate(p);
    }
    delete m;
}

template <class M>
void BM_batch(benchmark::State& state) {
    constexpr std::size_t count = 10000;
    const auto max = static_cast<std::size_t>(state.range(0));
    std::mt19937_64 rng(42);
    std::vector<std::size_t> sizes(count), order(count);
    std::size_t live = 0;
    for (std::size_t i = 0; i < count; ++i) {
        sizes[i] = 1 + rng() % max;
        live += sizes[i];
        order[i] = i;
    }
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<void*> ps(count);
    auto* m = new M();
    double os = 0, meta = 0;
    for (auto _ : state) {
        for (std::size_t i = 0; i < count; ++i) ps[i] = m->allocate(sizes[i]);
        os = static_cast<double>(m->os_bytes());
        meta = static_cast<double>(m->meta());
        for (std::size_t i : order) m->deallocate(ps[i]);
    }
    delete m;
    state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(count));
    state.counters["ns_per_pair"] = benchmark::Counter(static_cast<double>(state.iterations() * count),
                                                       benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
    state.counters["os_per_live"] = os / static_cast<double>(live);
    state.counters["meta_KiB"] = meta / 1024.0;
}

#define ALLOTHEQUE_MALLOC_LAYER_BENCH(M)                                 \
    BENCHMARK_TEMPLATE(BM_pair, M)->Arg(16)->Arg(64)->Arg(1000);        \
    BENCHMARK_TEMPLATE(BM_batch, M)->Arg(128)->Arg(1024)->Arg(8192)

ALLOTHEQUE_MALLOC_LAYER_BENCH(sized_velox);
ALLOTHEQUE_MALLOC_LAYER_BENCH(page_map_velox);
ALLOTHEQUE_MALLOC_LAYER_BENCH(sized_medius);
ALLOTHEQUE_MALLOC_LAYER_BENCH(page_map_medius);
ALLOTHEQUE_MALLOC_LAYER_BENCH(lea_m);
ALLOTHEQUE_MALLOC_LAYER_BENCH(system_m);

} // namespace
