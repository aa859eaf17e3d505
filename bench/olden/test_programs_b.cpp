// Smoke test for power, treeadd, tsp, voronoi, debruijn and md.
//
//   test_programs_b [quick|standard|full] [--plain] [program...]
//
// Default: every program at quick scale through a malloc-based counting
// policy that checks sized deallocation, counts objects and live bytes, and
// requires live bytes to return to 0. --plain uses bare malloc/free (for
// timing). Prints name, time, checksum, object statistics; exits non-zero on
// any failure. Times are wall clock and process CPU time.
#include <chrono>
#include <cstdint>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <list>
#include <map>
#include <memory>
#include <new>
#include <type_traits>
#include <string>
#include <vector>

#include "common/policy.hpp"
#include "common/stl_adapter.hpp"
#include "olden/debruijn.hpp"
#include "olden/md.hpp"
#include "olden/power.hpp"
#include "olden/scale.hpp"
#include "olden/treeadd.hpp"
#include "olden/tsp.hpp"
#include "olden/voronoi.hpp"

namespace {

// malloc with a 16-byte header holding the requested size, so that sized
// deallocation can be checked.
struct counting_policy {
    static constexpr std::size_t header = 16;
    std::uint64_t objects = 0, live_objects = 0, max_live_objects = 0;
    std::uint64_t bytes = 0, live_bytes = 0, max_live_bytes = 0;
    std::uint64_t size_errors = 0, hinted = 0;
    std::map<std::size_t, std::uint64_t> sizes; // histogram, filled in finish()
    static constexpr std::size_t small_limit = 4096;
    std::vector<std::uint64_t> small = std::vector<std::uint64_t>(small_limit, 0);

    void* allocate(std::size_t n, const void* hint) {
        auto* raw = static_cast<unsigned char*>(std::malloc(n + header));
        if (raw == nullptr) throw std::bad_alloc();
        std::memcpy(raw, &n, sizeof n);
        ++objects;
        if (++live_objects > max_live_objects) max_live_objects = live_objects;
        bytes += n;
        if ((live_bytes += n) > max_live_bytes) max_live_bytes = live_bytes;
        if (hint != nullptr) ++hinted;
        if (n < small_limit) ++small[n];
        else ++sizes[n];
        return raw + header;
    }
    void deallocate(void* p, std::size_t n) {
        auto* raw = static_cast<unsigned char*>(p) - header;
        std::size_t stored;
        std::memcpy(&stored, raw, sizeof stored);
        if (stored != n) ++size_errors;
        --live_objects;
        live_bytes -= stored;
        std::free(raw);
    }
    const char* name() const { return "malloc-counting"; }
};

struct plain_policy {
    void* allocate(std::size_t n, const void*) {
        void* p = std::malloc(n);
        if (p == nullptr) throw std::bad_alloc();
        return p;
    }
    void deallocate(void* p, std::size_t) { std::free(p); }
    const char* name() const { return "malloc"; }
};

static_assert(bench::policy<counting_policy>);
static_assert(bench::policy<plain_policy>);

using bench::olden::scale;

struct program {
    const char* name;
    std::uint64_t (*counted)(counting_policy&, scale);
    std::uint64_t (*plain)(plain_policy&, scale);
};

template <template <class> class F>
program make(const char* name) {
    return {name, &F<counting_policy>::run, &F<plain_policy>::run};
}

#define BENCH_PROGRAM(prog)                                                              \
    template <class P>                                                                   \
    struct prog##_fn {                                                                   \
        static std::uint64_t run(P& p, scale s) { return bench::olden::run_##prog(p, s); } \
    };
BENCH_PROGRAM(power)
BENCH_PROGRAM(treeadd)
BENCH_PROGRAM(tsp)
BENCH_PROGRAM(voronoi)
BENCH_PROGRAM(debruijn)
BENCH_PROGRAM(md)
#undef BENCH_PROGRAM

std::string size_summary(const counting_policy& c) {
    // The most frequent sizes (up to 6), as "size x count".
    std::vector<std::pair<std::uint64_t, std::size_t>> all;
    for (std::size_t i = 0; i < c.small.size(); ++i)
        if (c.small[i] != 0) all.emplace_back(c.small[i], i);
    for (const auto& [sz, n] : c.sizes) all.emplace_back(n, sz);
    std::string out;
    std::vector<bool> used(all.size(), false);
    for (int k = 0; k < 6; ++k) {
        std::size_t best = all.size();
        for (std::size_t i = 0; i < all.size(); ++i)
            if (!used[i] && (best == all.size() || all[i].first > all[best].first)) best = i;
        if (best == all.size()) break;
        used[best] = true;
        if (!out.empty()) out += ", ";
        out += std::to_string(all[best].second) + "B x" + std::to_string(all[best].first);
    }
    if (all.size() > 6) out += ", ... (" + std::to_string(all.size()) + " sizes)";
    return out;
}

// The STL adapter: Allocator requirements, overflow, hint chaining.
struct recording_policy {
    const void* last_hint = nullptr;
    std::uint64_t calls = 0;
    void* allocate(std::size_t n, const void* hint) {
        last_hint = hint;
        ++calls;
        return ::operator new(n);
    }
    void deallocate(void* p, std::size_t n) { ::operator delete(p, n); }
    const char* name() const { return "recording"; }
};

int check_stl_adapter() {
    using A = bench::stl_allocator<int, recording_policy>;
    using AT = std::allocator_traits<A>;
    using B = AT::rebind_alloc<double>;
    static_assert(std::is_same_v<AT::value_type, int>);
    static_assert(std::is_same_v<B, bench::stl_allocator<double, recording_policy>>);
    static_assert(std::is_nothrow_copy_constructible_v<A>);
    int failures = 0;
    auto expect = [&failures](bool ok, const char* what) {
        if (!ok) {
            std::printf("FAIL stl_adapter: %s\n", what);
            ++failures;
        }
    };
    recording_policy rp, other;
    bench::stl_context<recording_policy> ctx(rp), ctx2(rp), ctx3(other);
    A a(ctx);
    const B b(a);
    expect(a == b && !(a != b), "a rebound copy compares equal");
    expect(A(ctx2) == a, "adapters over the same policy compare equal");
    expect(A(ctx3) != a, "adapters over different policies compare unequal");
    expect(A(B(a)) == a, "rebinding back compares equal");
    int* p = a.allocate(3);
    expect(rp.last_hint == nullptr, "first allocation has no hint");
    double* q = B(a).allocate(1);
    expect(rp.last_hint == p, "next allocation (through a rebound copy) is hinted with the previous one");
    B(a).deallocate(q, 1);
    a.deallocate(p, 3);
    bool threw = false;
    try {
        (void)a.allocate(std::numeric_limits<std::size_t>::max() / sizeof(int) + 1);
    } catch (const std::bad_array_new_length&) {
        threw = true;
    }
    expect(threw, "n * sizeof(T) overflow throws std::bad_array_new_length");
    {
        std::list<int, A> xs(a);
        for (int i = 0; i < 10; ++i) xs.push_back(i);
        std::map<int, int, std::less<int>, bench::stl_allocator<std::pair<const int, int>, recording_policy>> m(a);
        m[1] = 2;
        expect(xs.size() == 10 && m.at(1) == 2, "containers work through the adapter");
    }
    return failures;
}

} // namespace

int main(int argc, char** argv) {
    scale s = scale::quick;
    bool plain = false;
    std::vector<std::string> only;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "quick") s = scale::quick;
        else if (a == "standard") s = scale::standard;
        else if (a == "full") s = scale::full;
        else if (a == "--plain") plain = true;
        else only.push_back(a);
    }
    const program programs[] = {make<power_fn>("power"), make<treeadd_fn>("treeadd"), make<tsp_fn>("tsp"),
                                make<voronoi_fn>("voronoi"), make<debruijn_fn>("debruijn"), make<md_fn>("md")};
    int failures = check_stl_adapter();
    for (const program& p : programs) {
        if (!only.empty()) {
            bool wanted = false;
            for (const auto& o : only) wanted = wanted || o == p.name;
            if (!wanted) continue;
        }
        try {
            const auto t0 = std::chrono::steady_clock::now();
            const std::clock_t c0 = std::clock();
            counting_policy counter;
            plain_policy bare;
            const std::uint64_t sum = plain ? p.plain(bare, s) : p.counted(counter, s);
            const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            const double cpu = double(std::clock() - c0) / CLOCKS_PER_SEC;
            std::printf("%-9s %-8s %7.3f s (cpu %7.3f s)  checksum %016llx", p.name, bench::olden::to_string(s), secs,
                        cpu, static_cast<unsigned long long>(sum));
            if (!plain) {
                std::printf("  objects %llu  max live %llu (%.1f MiB)  avg %.1f B  hinted %.1f%%\n          sizes: %s\n",
                            static_cast<unsigned long long>(counter.objects),
                            static_cast<unsigned long long>(counter.max_live_objects),
                            double(counter.max_live_bytes) / (1 << 20),
                            counter.objects ? double(counter.bytes) / double(counter.objects) : 0.0,
                            counter.objects ? 100.0 * double(counter.hinted) / double(counter.objects) : 0.0,
                            size_summary(counter).c_str());
                if (counter.live_bytes != 0 || counter.live_objects != 0) {
                    std::printf("FAIL %s: %llu bytes in %llu objects still live\n", p.name,
                                static_cast<unsigned long long>(counter.live_bytes),
                                static_cast<unsigned long long>(counter.live_objects));
                    ++failures;
                }
                if (counter.size_errors != 0) {
                    std::printf("FAIL %s: %llu deallocations with a wrong size\n", p.name,
                                static_cast<unsigned long long>(counter.size_errors));
                    ++failures;
                }
            } else {
                std::printf("\n");
            }
        } catch (const std::exception& e) {
            std::printf("FAIL %s: %s\n", p.name, e.what());
            ++failures;
        }
        std::fflush(stdout);
    }
    return failures == 0 ? 0 : 1;
}
