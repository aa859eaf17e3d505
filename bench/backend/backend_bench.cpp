// What the back end is for, measured the same way for every allocator:
//
//   large_churn   32 live blocks of 64 KiB - 1 MiB (uniform, fixed seed); each
//                 step frees a random one and allocates a replacement, writing
//                 its first and last page: ns per step.
//   after_free    100 MB in blocks of 16 B - 1 MiB (mostly small) allocated and
//                 written, then all freed: resident memory at the peak, right
//                 after the frees, and after one trim (malloc_trim(0), or the
//                 heap's trim()); the share of the peak given back.
//
// Allocator: --heap malloc (whatever malloc is active: run it under LD_PRELOAD
// for jemalloc, mimalloc, tcmalloc or liballotheque_malloc_*.so), or an
// allotheque heap used directly: segregated, kingsley, velox, lea.
// One JSON line on stdout.
#include <malloc.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <allotheque/allocators/kingsley.hpp>
#include <allotheque/allocators/lea.hpp>
#include <allotheque/allocators/segregated.hpp>
#include <allotheque/allocators/velox.hpp>

#include "process_memory.hpp"

namespace {

namespace al = allotheque;

struct malloc_heap {
    void* allocate(std::size_t n) { return std::malloc(n); }
    void deallocate(void* p, std::size_t) { std::free(p); }
    void trim() { malloc_trim(0); }
};
template <class H>
struct direct_heap {
    H h;
    const void* last = nullptr;
    void* allocate(std::size_t n) {
        void* p = h.allocate(al::request{n, last});
        if constexpr (H::locality_aware) last = p;
        return p;
    }
    void deallocate(void* p, std::size_t n) { h.deallocate(p, al::request{n}); }
    void trim() { h.trim(); }
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

template <class A>
void large_churn(A& a, std::size_t steps, std::string& out) {
    std::mt19937_64 rng(11);
    std::uniform_int_distribution<std::size_t> size(64 * 1024, 1024 * 1024);
    struct blk {
        unsigned char* p;
        std::size_t n;
    };
    std::vector<blk> live(32);
    for (blk& b : live) {
        b.n = size(rng);
        b.p = static_cast<unsigned char*>(a.allocate(b.n));
        b.p[0] = b.p[b.n - 1] = 1;
    }
    const auto t0 = std::chrono::steady_clock::now();
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < steps; ++i) {
        blk& b = live[rng() % live.size()];
        sum += b.p[0] + b.p[b.n - 1];
        a.deallocate(b.p, b.n);
        b.n = size(rng);
        b.p = static_cast<unsigned char*>(a.allocate(b.n));
        std::memset(b.p, 1, 4096);
        std::memset(b.p + b.n - 4096, 1, 4096);
    }
    const double s = seconds_since(t0);
    for (blk& b : live) a.deallocate(b.p, b.n);
    char buf[160];
    std::snprintf(buf, sizeof buf, "\"large_churn_ns_per_step\":%.1f,\"large_churn_check\":%llu", s * 1e9 / steps,
                  static_cast<unsigned long long>(sum));
    out += buf;
}

template <class A>
void after_free(A& a, std::string& out) {
    const long base = static_cast<long>(allotheque::tools::proc_status_bytes("VmRSS"));
    std::mt19937_64 rng(12);
    std::vector<std::pair<void*, std::size_t>> v;
    std::size_t total = 0;
    while (total < (std::size_t{100} << 20)) {
        const std::size_t n = rng() % 50 == 0 ? 4096 + rng() % (1 << 20) : 16 + rng() % 500;
        void* p = a.allocate(n);
        std::memset(p, 7, n);
        v.emplace_back(p, n);
        total += n;
    }
    const long peak = static_cast<long>(allotheque::tools::proc_status_bytes("VmRSS"));
    for (auto [p, n] : v) a.deallocate(p, n);
    std::vector<std::pair<void*, std::size_t>>().swap(v);
    const long freed = static_cast<long>(allotheque::tools::proc_status_bytes("VmRSS"));
    a.trim();
    const long trimmed = static_cast<long>(allotheque::tools::proc_status_bytes("VmRSS"));
    const double grown = static_cast<double>(peak - base);
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "\"after_free_peak_bytes\":%ld,\"after_free_freed_bytes\":%ld,\"after_free_trimmed_bytes\":%ld,"
                  "\"given_back_after_free\":%.3f,\"given_back_after_trim\":%.3f",
                  peak - base, freed - base, trimmed - base, grown > 0 ? (peak - freed) / grown : 0.0,
                  grown > 0 ? (peak - trimmed) / grown : 0.0);
    out += buf;
}

template <class A>
int run(const std::string& heap, const std::string& what, std::size_t steps) {
    A a;
    std::string out = "{\"heap\":\"" + heap + "\",\"malloc_library\":\"" + allotheque::tools::malloc_library() + "\",";
    if (what == "large_churn") large_churn(a, steps, out);
    else if (what == "after_free") after_free(a, out);
    else return 64;
    std::printf("%s}\n", out.c_str());
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    std::string heap = "malloc", what = "large_churn";
    std::size_t steps = 200000;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string k = argv[i], v = argv[i + 1];
        if (k == "--heap") heap = v;
        else if (k == "--workload") what = v;
        else if (k == "--steps") steps = std::strtoull(v.c_str(), nullptr, 10);
        else {
            std::fprintf(stderr, "usage: backend_bench --workload large_churn|after_free --heap malloc|segregated|"
                                 "kingsley|velox|lea [--steps N]\n");
            return 64;
        }
    }
    if (heap == "malloc") return run<malloc_heap>(heap, what, steps);
    if (heap == "segregated") return run<direct_heap<al::segregated_heap<>>>(heap, what, steps);
    if (heap == "kingsley") return run<direct_heap<al::kingsley_heap<>>>(heap, what, steps);
    if (heap == "velox") return run<direct_heap<al::velox_heap<>>>(heap, what, steps);
    if (heap == "lea") return run<direct_heap<al::lea_heap<>>>(heap, what, steps);
    std::fprintf(stderr, "backend_bench: unknown heap '%s'\n", heap.c_str());
    return 64;
}
