// ns per allocate/free pair for LIFO, random-order and steady-state churn at
// 16, 32 and 64 bytes (see patterns.hpp), for malloc (glibc, or the library
// preloaded with LD_PRELOAD: the benchmark's label names the active one),
// std::pmr::unsynchronized_pool_resource and the allotheque heaps.
//   alloc_patterns --benchmark_filter=malloc   (what run.py runs under LD_PRELOAD)
#include <benchmark/benchmark.h>

#include <string>

#include "common/policies.hpp"
#include "micro/patterns.hpp"

namespace {

using namespace bench;
using namespace bench::micro;

template <class P, void (*Pattern)(benchmark::State&, P&)>
void run(benchmark::State& st) {
    P p;
    if constexpr (std::is_same_v<P, raw::malloc_policy>) {
        static const std::string lib = malloc_library();
        st.SetLabel(lib);
    }
    Pattern(st, p);
}

#define ALLOTHEQUE_PATTERNS(P, label)                                                                 \
    BENCHMARK(run<P, lifo<P>>)->Name("lifo/" label)->Arg(16)->Arg(32)->Arg(64);                        \
    BENCHMARK(run<P, random_free<P>>)->Name("random/" label)->Arg(16)->Arg(32)->Arg(64);               \
    BENCHMARK(run<P, churn<P>>)->Name("churn/" label)->Arg(16)->Arg(32)->Arg(64);

ALLOTHEQUE_PATTERNS(raw::malloc_policy, "malloc")
ALLOTHEQUE_PATTERNS(raw::pmr_policy, "pmr")
ALLOTHEQUE_PATTERNS(raw::kingsley_policy, "kingsley")
ALLOTHEQUE_PATTERNS(raw::quickfit_policy, "quickfit")
ALLOTHEQUE_PATTERNS(raw::velox_policy, "velox")
ALLOTHEQUE_PATTERNS(raw::medius_policy, "medius")
ALLOTHEQUE_PATTERNS(raw::defero_policy, "defero")
ALLOTHEQUE_PATTERNS(raw::lea_policy, "lea")
ALLOTHEQUE_PATTERNS(raw::lea_deferred_policy, "lea_deferred")
ALLOTHEQUE_PATTERNS(raw::kingsley_coalescing_policy, "kingsley_coalescing")

} // namespace
