// preload_program --program NAME [--scale quick|standard|full]
//
// The program the test of replay's malloc rows records, replays, and runs
// for real under LD_PRELOAD of each malloc library (tools/trace/tests,
// replay_vs_preload.cmake). It prints one JSON line whose
// peak_rss_delta_bytes is the growth of the resident set over the work,
// measured as the bench and the replay worker measure it
// (tools/common/process_memory.hpp), so the two figures compare.
//
//   NAME = an Olden program: the benchmarks' driver (bench/olden/driver.hpp,
//          run_malloc.cpp) with only its malloc policy; a few sizes each.
//   NAME = sizes: thousands of distinct sizes, 8 B to 256 KiB, allocated,
//          resized and freed at random (fixed seed), every byte written:
//          where a malloc's size rounding and large-block threshold decide
//          its memory, which the Olden programs' few sizes barely exercise.
//
// Built here rather than as the bench's `olden`: the dev preset builds that
// with ASan, which cannot share a process with a preloaded malloc (this
// directory strips the sanitizer flags).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "olden/driver.hpp"
#include "process_memory.hpp"

namespace {

struct live_block {
    unsigned char* p;
    std::size_t n;
};

// Static, and written before the measurement starts: the table's own pages
// are resident already, as the replay worker's slot table is.
constexpr std::size_t slot_count = 4096;
live_block slots[slot_count];

// Log-uniform 8 B .. 16 KiB, and one request in 64 from 64 KiB to 256 KiB.
// std::mt19937_64: its sequence is fixed by the standard, so every library
// and every standard library sees the same program.
std::size_t random_size(std::mt19937_64& r) {
    if (r() % 64 == 0) return 65536 + r() % (196608 + 1);
    const unsigned log2 = 3 + unsigned(r() % 11);  // 8 .. 8 KiB as the power below
    const std::size_t lo = std::size_t(1) << log2;
    return lo + r() % (lo + 1);
}

void fill(unsigned char* p, std::size_t n, std::uint64_t tag) { std::memset(p, int(tag & 0xff), n); }

int run_sizes(bench::olden::scale scale) {
    const long ops = scale == bench::olden::scale::quick ? 200'000 : scale == bench::olden::scale::standard ? 2'000'000 : 10'000'000;
    std::memset(slots, 0, sizeof slots);
    std::mt19937_64 r{0x5eed5eed5eed5eedULL};
    allotheque::tools::memory_probe mem;
    mem.start();
    std::uint64_t checksum = 0;
    for (long i = 0; i < ops; ++i) {
        live_block& b = slots[r() % slot_count];
        if (!b.p) {
            b.n = random_size(r);
            b.p = static_cast<unsigned char*>(std::malloc(b.n));
            if (!b.p) return std::fprintf(stderr, "preload_program: malloc(%zu) failed\n", b.n), 1;
            fill(b.p, b.n, std::uint64_t(i));
        } else if (r() % 4 == 0) {
            const std::size_t n = random_size(r);
            auto* q = static_cast<unsigned char*>(std::realloc(b.p, n));
            if (!q) return std::fprintf(stderr, "preload_program: realloc(%zu) failed\n", n), 1;
            if (n > b.n) fill(q + b.n, n - b.n, std::uint64_t(i));
            b.p = q;
            b.n = n;
        } else {
            checksum += b.p[b.n / 2];
            std::free(b.p);
            b.p = nullptr;
        }
    }
    const std::size_t peak = mem.peak_delta();
    for (auto& b : slots) std::free(b.p);
    std::printf("{\"program\": \"sizes\", \"allocator\": \"malloc\", \"malloc_library\": \"%s\", \"ops\": %ld,"
                " \"checksum\": %llu, \"rss_before_bytes\": %zu, \"peak_rss_delta_bytes\": %zu, \"hwm_reset\": %s}\n",
                allotheque::tools::malloc_library(), ops, (unsigned long long)checksum, mem.rss_before, peak,
                mem.hwm_reset ? "true" : "false");
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    bench::olden::options o;
    o.allocator = "malloc";  // whichever malloc is active: the preloaded one
    bool bad = argc % 2 == 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string key = argv[i], value = argv[i + 1];
        if (key == "--program") o.program = value;
        else if (key == "--scale" && value == "quick") o.size = bench::olden::scale::quick;
        else if (key == "--scale" && value == "standard") o.size = bench::olden::scale::standard;
        else if (key == "--scale" && value == "full") o.size = bench::olden::scale::full;
        else bad = true;
    }
    if (bad || o.program.empty()) {
        std::fputs("usage: preload_program --program sizes|OLDEN_PROGRAM [--scale quick|standard|full]\n", stderr);
        return 2;
    }
    if (o.program == "sizes") return run_sizes(o.size);
    return bench::olden::drive_malloc(o);
}
