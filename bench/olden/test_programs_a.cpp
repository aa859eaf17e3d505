// Runs bh, bisort, em3d, health, mst and perimeter once each on a counting
// ::operator new policy and reports time, checksum and allocation statistics.
//
//   test_programs_a [quick|standard|full] [--check-hints] [program...]
//
// Default: quick scale, all six programs. --check-hints additionally tracks
// every live block (in a std::map, outside the policy's accounting) and
// verifies that each hint points into a live block, that every free matches a
// live block of the same size, and reports how many requests had no hint.
// Exits non-zero if a program throws, leaks, or misuses the policy.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iterator>
#include <map>
#include <new>

#include "olden/bh.hpp"
#include "olden/bisort.hpp"
#include "olden/em3d.hpp"
#include "olden/health.hpp"
#include "olden/mst.hpp"
#include "olden/perimeter.hpp"

namespace {

struct counting_policy {
    std::size_t live_bytes = 0;
    std::size_t max_live_bytes = 0;
    std::size_t live_objects = 0;
    std::size_t max_live_objects = 0;
    std::uint64_t total_objects = 0;
    std::uint64_t total_bytes = 0;
    std::uint64_t null_hints = 0;

    // Distinct request sizes (first 8) with their counts.
    static constexpr int max_sizes = 8;
    std::size_t sizes[max_sizes] = {};
    std::uint64_t size_counts[max_sizes] = {};
    int nsizes = 0;
    std::uint64_t other_sizes = 0;

    bool check_hints = false;
    std::map<std::uintptr_t, std::size_t> blocks;   // only with check_hints
    std::uint64_t bad_hints = 0;
    std::uint64_t bad_frees = 0;

    void* allocate(std::size_t n, const void* hint) {
        void* p = ::operator new(n);
        live_bytes += n;
        if (live_bytes > max_live_bytes) max_live_bytes = live_bytes;
        ++live_objects;
        if (live_objects > max_live_objects) max_live_objects = live_objects;
        ++total_objects;
        total_bytes += n;
        if (hint == nullptr) ++null_hints;
        int i = 0;
        while (i < nsizes && sizes[i] != n) ++i;
        if (i < nsizes) ++size_counts[i];
        else if (nsizes < max_sizes) {
            sizes[nsizes] = n;
            size_counts[nsizes++] = 1;
        } else ++other_sizes;
        if (check_hints) {
            if (hint != nullptr) {
                const auto h = reinterpret_cast<std::uintptr_t>(hint);
                auto it = blocks.upper_bound(h);
                if (it == blocks.begin() || h >= std::prev(it)->first + std::prev(it)->second) ++bad_hints;
            }
            blocks.emplace(reinterpret_cast<std::uintptr_t>(p), n);
        }
        return p;
    }
    void deallocate(void* p, std::size_t n) {
        if (check_hints) {
            auto it = blocks.find(reinterpret_cast<std::uintptr_t>(p));
            if (it == blocks.end() || it->second != n) ++bad_frees;
            else blocks.erase(it);
        }
        live_bytes -= n;
        --live_objects;
        ::operator delete(p, n);
    }
    const char* name() const { return "counting-operator-new"; }
};
static_assert(bench::policy<counting_policy>);

using bench::olden::scale;
using runner = std::uint64_t (*)(counting_policy&, scale);

struct program {
    const char* name;
    runner run;
};

const program programs[] = {
    {"bh", [](counting_policy& p, scale s) { return bench::olden::run_bh(p, s); }},
    {"bisort", [](counting_policy& p, scale s) { return bench::olden::run_bisort(p, s); }},
    {"em3d", [](counting_policy& p, scale s) { return bench::olden::run_em3d(p, s); }},
    {"health", [](counting_policy& p, scale s) { return bench::olden::run_health(p, s); }},
    {"mst", [](counting_policy& p, scale s) { return bench::olden::run_mst(p, s); }},
    {"perimeter", [](counting_policy& p, scale s) { return bench::olden::run_perimeter(p, s); }},
};

void print_sizes() {
    namespace o = bench::olden;
    std::printf("object sizes (bytes): bh body %zu, bh cell %zu | bisort node %zu | em3d node %zu "
                "(+ arrays of pointers/doubles) | health village %zu, patient %zu, list element %zu | "
                "mst vertex %zu, hash entry %zu (+ bucket array) | perimeter node %zu\n",
                sizeof(o::bh_impl::body), sizeof(o::bh_impl::cell), sizeof(o::bisort_impl::node),
                sizeof(o::em3d_impl::node), sizeof(o::health_impl::village), sizeof(o::health_impl::patient),
                sizeof(o::health_impl::list_elem), sizeof(o::mst_impl::vertex), sizeof(o::mst_impl::hash_entry),
                sizeof(o::perimeter_impl::quad_node));
}

} // namespace

int main(int argc, char** argv) {
    scale s = scale::quick;
    bool check_hints = false;
    const char* only[16];
    int nonly = 0;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "quick") == 0) s = scale::quick;
        else if (std::strcmp(argv[i], "standard") == 0) s = scale::standard;
        else if (std::strcmp(argv[i], "full") == 0) s = scale::full;
        else if (std::strcmp(argv[i], "--check-hints") == 0) check_hints = true;
        else if (nonly < 16) only[nonly++] = argv[i];
    }
    print_sizes();
    std::printf("scale %s%s\n", bench::olden::to_string(s), check_hints ? " (checking hints; times are not meaningful)" : "");
    std::printf("%-10s %9s %18s %11s %10s %11s %9s %13s %9s\n", "program", "time_s", "checksum", "objects",
                "max_live", "max_live_MB", "avg_B", "null_hints", "sizes");
    int failures = 0;
    int ran = 0;
    for (const program& pg : programs) {
        if (nonly > 0) {
            bool wanted = false;
            for (int i = 0; i < nonly; ++i) wanted = wanted || std::strcmp(only[i], pg.name) == 0;
            if (!wanted) continue;
        }
        ++ran;
        counting_policy pol;
        pol.check_hints = check_hints;
        std::uint64_t sum = 0;
        const auto t0 = std::chrono::steady_clock::now();
        try {
            sum = pg.run(pol, s);
        } catch (const std::exception& e) {
            std::printf("%-10s FAILED: %s\n", pg.name, e.what());
            ++failures;
            continue;
        }
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::printf("%-10s %9.3f %016llx %11llu %10zu %11.1f %9.1f %13llu %9d\n", pg.name, secs,
                    static_cast<unsigned long long>(sum), static_cast<unsigned long long>(pol.total_objects),
                    pol.max_live_objects, static_cast<double>(pol.max_live_bytes) / (1024.0 * 1024.0),
                    static_cast<double>(pol.total_bytes) / static_cast<double>(pol.total_objects ? pol.total_objects : 1),
                    static_cast<unsigned long long>(pol.null_hints), pol.nsizes);
        std::printf("           request sizes:");
        for (int i = 0; i < pol.nsizes; ++i)
            std::printf(" %zuB x%llu", pol.sizes[i], static_cast<unsigned long long>(pol.size_counts[i]));
        if (pol.other_sizes != 0) std::printf(" + %llu of other sizes", static_cast<unsigned long long>(pol.other_sizes));
        std::printf("\n");
        if (pol.live_bytes != 0 || pol.live_objects != 0) {
            std::printf("%-10s LEAK: %zu bytes in %zu objects still live\n", pg.name, pol.live_bytes, pol.live_objects);
            ++failures;
        }
        if (check_hints) {
            std::printf("           hints outside live blocks: %llu, bad frees: %llu\n",
                        static_cast<unsigned long long>(pol.bad_hints), static_cast<unsigned long long>(pol.bad_frees));
            if (pol.bad_hints != 0 || pol.bad_frees != 0) ++failures;
        }
    }
    if (ran == 0) {
        std::printf("no program matched\n");
        return 2;
    }
    if (failures == 0) std::printf("all passed\n");
    else std::printf("%d failure(s)\n", failures);
    return failures == 0 ? 0 : 1;
}
