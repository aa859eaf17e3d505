// The Olden driver: runs ONE (program, allocator) in this process and prints
// one JSON line. Instantiated once per policy in run_<allocator>.cpp so the
// policies compile in parallel.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/policies.hpp"
#include "process_memory.hpp"
#include "olden/programs.hpp"
#include "olden/scale.hpp"

namespace bench::olden {

struct options {
    std::string program;
    std::string allocator;   // glibc | jemalloc | mimalloc | tcmalloc | malloc | pmr | kingsley | ...
    scale size = scale::standard;
    bool aged = false;
    int repeat = 1;
    std::size_t age_objects = 0;   // 0: the default for the scale
};

// Every allocator name the driver accepts, with the policy that serves it.
// glibc/jemalloc/mimalloc/tcmalloc are the malloc policy; the name states
// which library must be active (LD_PRELOAD) and the driver checks it.
int drive_malloc(const options&);
int drive_pmr(const options&);
int drive_kingsley(const options&);
int drive_quickfit(const options&);
int drive_segregated(const options&);
int drive_velox(const options&);
int drive_medius(const options&);
int drive_defero(const options&);
int drive_lea(const options&);
int drive_lea_deferred(const options&);
int drive_kingsley_coalescing(const options&);
std::vector<std::string> program_names();

// The same measure as the replay worker's (tools/common/process_memory.hpp).
using allotheque::tools::memory_probe;

inline std::size_t default_age_objects(scale s) { return s == scale::quick ? 200'000 : 2'000'000; }

template <class P>
int drive(P& policy, const options& o, const char* allocator_label) {
    const program_entry<P>* entry = nullptr;
    for (const auto& e : programs<P>())
        if (e.name == o.program) entry = &e;
    if (!entry) {
        std::fprintf(stderr, "olden: unknown program '%s'\n", o.program.c_str());
        return 2;
    }

    // Ageing: 2 M (quick: 200 k) objects of 16-128 B in random sizes through
    // the same policy, a random half freed in random order, the rest kept
    // alive while the program runs. The seed is fixed: every allocator sees
    // the same sequence.
    std::vector<std::pair<void*, std::uint32_t>> aged;
    std::size_t aged_live_bytes = 0;
    if (o.aged) {
        const std::size_t n = o.age_objects ? o.age_objects : default_age_objects(o.size);
        aged.reserve(n);
        std::mt19937_64 rng(0x616765645f686561ULL);
        std::uniform_int_distribution<std::uint32_t> size(16, 128);
        for (std::size_t i = 0; i < n; ++i) {
            const std::uint32_t s = size(rng);
            aged.emplace_back(policy.allocate(s, i ? aged.back().first : nullptr), s);
        }
        std::shuffle(aged.begin(), aged.end(), rng);
        for (std::size_t i = 0; i < n / 2; ++i) policy.deallocate(aged[i].first, aged[i].second);
        aged.erase(aged.begin(), aged.begin() + static_cast<std::ptrdiff_t>(n / 2));
        aged_live_bytes = policy.live_bytes;
        policy.reset_peak();
    }

    std::size_t heap_os_before = 0;
    if constexpr (P::is_heap) heap_os_before = policy.inner.stats().os_bytes;

    memory_probe mem;
    mem.start();

    std::vector<double> secs;
    std::uint64_t checksum = 0;
    for (int r = 0; r < std::max(1, o.repeat); ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        std::uint64_t c = 0;
        try {
            c = entry->run(policy, o.size);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "olden: %s failed: %s\n", o.program.c_str(), e.what());
            return 1;
        }
        const auto t1 = std::chrono::steady_clock::now();
        secs.push_back(std::chrono::duration<double>(t1 - t0).count());
        if (r > 0 && c != checksum) {
            std::fprintf(stderr, "olden: checksum differs between repetitions\n");
            return 1;
        }
        checksum = c;
    }
    const std::size_t peak_delta = mem.peak_delta();
    const std::size_t peak_requested = policy.peak_bytes - aged_live_bytes;

    std::vector<double> sorted = secs;
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted.size() % 2 ? sorted[sorted.size() / 2]
                                            : (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]) / 2;

    std::string line = "{";
    char buf[256];
    auto field = [&](const char* k, const std::string& v, bool quote) {
        if (line.size() > 1) line += ", ";
        line += '"';
        line += k;
        line += "\": ";
        if (quote) line += '"';
        line += v;
        if (quote) line += '"';
    };
    auto num = [&](std::uint64_t v) { return std::to_string(v); };
    field("program", o.program, true);
    field("allocator", allocator_label, true);
    if constexpr (!P::is_heap) field("malloc_library", malloc_library(), true);
    field("scale", to_string(o.size), true);
    field("aged", o.aged ? "true" : "false", false);
    field("aged_objects_live", num(aged.size()), false);
    field("aged_bytes_live", num(aged_live_bytes), false);
    std::snprintf(buf, sizeof buf, "%.6f", median);
    field("seconds", buf, false);
    std::string each = "[";
    for (std::size_t i = 0; i < secs.size(); ++i) {
        std::snprintf(buf, sizeof buf, "%s%.6f", i ? ", " : "", secs[i]);
        each += buf;
    }
    field("seconds_each", each + "]", false);
    std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(checksum));
    field("checksum", buf, true);
    field("peak_requested_bytes", num(peak_requested), false);
    field("rss_before_bytes", num(mem.rss_before), false);
    field("peak_rss_delta_bytes", num(peak_delta), false);
    field("hwm_reset", mem.hwm_reset ? "true" : "false", false);
    if constexpr (P::is_heap) {
        const auto st = policy.inner.stats();
        field("heap_peak_os_bytes", num(st.peak_os_bytes), false);
        field("heap_os_bytes_before", num(heap_os_before), false);
        field("heap_metadata_bytes", num(st.metadata_bytes), false);
    }
    line += "}\n";
    std::fputs(line.c_str(), stdout);
    std::fflush(stdout);

    for (auto& [p, s] : aged) policy.deallocate(p, s);
    return 0;
}

} // namespace bench::olden
