// Cliffs: the slowest single operation against the steady state, on patterns
// that send an allocator off its fast path. Every allocate and every free of the
// timed phase is timed on its own (rdtsc on x86-64, calibrated against
// steady_clock, the timer's own cost subtracted); the setup is not timed.
//
//   alternating   100k blocks of 32 B, then 100k of 544 B (so low addresses
//                 hold only 32 B chunks), half of each freed at random; then
//                 free a random block, allocate 32 / 544 in turn (hint: the
//                 previous block), so no request finds its size where the
//                 previous one was served
//   every_other   200k blocks of 64 B, every other one freed; then allocate
//                 48 B (kept) and free one more 64 B block, in turn
//   absent_size   100k live blocks of 16-512 B; each step allocates a size
//                 the hint (a random live block) does not have, then frees a
//                 random block
//   aged          1M random allocations and frees (16 B - 4 KiB, small ones
//                 likelier, about 100k live) first; then free a random block,
//                 allocate a random size (hint: the previous block)
//   lea_bin       a bin of 20k free blocks of 1040 B (kept apart by 16 B
//                 blocks) that a 1200 B request cannot use; then 1200 B
//                 requests (kept), each after nine 32 B allocate/free pairs
//   holes_1m      1M blocks of 32 B, every other one freed; then the aged
//                 pattern's steps on that heap
//
// Allocator: --heap malloc (whatever malloc is active: run under LD_PRELOAD for
// jemalloc, mimalloc, tcmalloc), or velox, medius, lea (the header-only heaps,
// used directly, with the hint). --reps R repeats the pattern R times on one
// allocator (each rep frees all it allocated). One JSON line on stdout: the
// timer's resolution and, per rep, the steady state (see steady_state), the
// median, 99.9th percentile and slowest operation in ns, then the slowest
// operation that was slow in every rep (see repeatable); run.py reports
// medians over reps and the ratios p99.9 / steady and slowest / steady.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include <allotheque/allocators/lea.hpp>
#include <allotheque/allocators/medius.hpp>
#include <allotheque/allocators/velox.hpp>

#include "process_memory.hpp"

namespace {

namespace al = allotheque;

// ---- timing -----------------------------------------------------------------

inline std::uint64_t ticks() noexcept {
#if defined(__x86_64__)
    return __rdtsc();
#else
    return static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
#endif
}

struct clock_model {
    double ns_per_tick = 1.0;
    double overhead_ticks = 0.0;
    double resolution_ns = 0.0;   // the smallest step the timer showed
};

clock_model calibrate() {
    clock_model m;
    const auto t0 = std::chrono::steady_clock::now();
    const std::uint64_t k0 = ticks();
    while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(50)) {
    }
    const std::uint64_t k1 = ticks();
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    m.ns_per_tick = ns / static_cast<double>(k1 - k0);
    std::vector<std::uint64_t> empty(10001);
    for (auto& e : empty) {
        const std::uint64_t a = ticks();
        const std::uint64_t b = ticks();
        e = b - a;
    }
    std::uint64_t step = ~std::uint64_t{0};
    for (const auto e : empty)
        if (e > 0) step = std::min(step, e);
    m.resolution_ns = step == ~std::uint64_t{0} ? 0.0 : static_cast<double>(step) * m.ns_per_tick;
    std::nth_element(empty.begin(), empty.begin() + 5000, empty.end());
    m.overhead_ticks = static_cast<double>(empty[5000]);
    return m;
}

// Per-operation samples (ticks) of the timed phase.
struct recorder {
    std::vector<std::uint64_t> samples;
    template <class F>
    auto time(F&& f) {
        const std::uint64_t a = ticks();
        auto r = f();
        const std::uint64_t b = ticks();
        samples.push_back(b - a);
        return r;
    }
};

// ---- allocators ----------------------------------------------------------------

struct malloc_heap {
    void* allocate(std::size_t n, const void*) { return std::malloc(n); }
    void deallocate(void* p, std::size_t) { std::free(p); }
};
template <class H>
struct direct_heap {
    H h;
    void* allocate(std::size_t n, const void* hint) { return h.allocate(al::request{n, hint}); }
    void deallocate(void* p, std::size_t n) { h.deallocate(p, al::request{n}); }
};

struct block {
    void* p;
    std::size_t n;
};

void* checked(void* p) {
    if (!p) {
        std::fprintf(stderr, "cliff_bench: allocation failed\n");
        std::exit(70);
    }
    static_cast<unsigned char*>(p)[0] = 1;   // the block is used, as a program would
    return p;
}

// ---- patterns -------------------------------------------------------------------
// Each runs its setup on `a`, then `steps` steps through `rec`.

template <class A>
void timed_free(A& a, const block& b, recorder& rec) {
    rec.time([&] {
        a.deallocate(b.p, b.n);
        return 0;
    });
}
template <class A>
void free_all(A& a, const std::vector<block>& v) {
    for (const block& b : v) a.deallocate(b.p, b.n);
}

template <class A>
void take_random(A& a, std::vector<block>& live, std::mt19937_64& rng, recorder* rec) {
    const std::size_t i = rng() % live.size();
    const block b = live[i];
    live[i] = live.back();
    live.pop_back();
    if (rec) timed_free(a, b, *rec);
    else a.deallocate(b.p, b.n);
}

std::size_t aged_size(std::mt19937_64& rng) {
    const unsigned r = static_cast<unsigned>(rng() % 100);
    if (r < 60) return 16 + 8 * (rng() % 15);      // 16-128
    if (r < 90) return 128 + 16 * (rng() % 25);    // 128-512
    return 512 + 64 * (rng() % 57);                // 512-4096
}

template <class A>
void aged_steps(A& a, std::vector<block>& live, std::mt19937_64& rng, std::size_t steps, recorder& rec) {
    const void* prev = live.empty() ? nullptr : live.back().p;
    for (std::size_t s = 0; s < steps; ++s) {
        take_random(a, live, rng, &rec);
        const std::size_t n = aged_size(rng);
        void* p = rec.time([&] { return checked(a.allocate(n, prev)); });
        live.push_back({p, n});
        prev = p;
    }
}

template <class A>
void alternating(A& a, std::size_t steps, recorder& rec) {
    std::mt19937_64 rng(1);
    std::vector<block> live;
    for (std::size_t i = 0; i < 200'000; ++i) {
        const std::size_t n = i < 100'000 ? 32 : 544;
        live.push_back({checked(a.allocate(n, live.empty() ? nullptr : live.back().p)), n});
    }
    for (std::size_t i = 0; i < 100'000; ++i) take_random(a, live, rng, nullptr);
    const void* prev = live.back().p;
    for (std::size_t s = 0; s < steps; ++s) {
        take_random(a, live, rng, &rec);
        const std::size_t n = s % 2 ? 544 : 32;
        void* p = rec.time([&] { return checked(a.allocate(n, prev)); });
        live.push_back({p, n});
        prev = p;
    }
    free_all(a, live);
}

template <class A>
void every_other(A& a, std::size_t steps, recorder& rec) {
    std::vector<block> small, kept;
    for (std::size_t i = 0; i < 200'000; ++i) small.push_back({checked(a.allocate(64, small.empty() ? nullptr : small.back().p)), 64});
    std::vector<block> rest;
    for (std::size_t i = 0; i < small.size(); ++i) {
        if (i % 2) a.deallocate(small[i].p, 64);
        else rest.push_back(small[i]);
    }
    const void* prev = rest.front().p;
    for (std::size_t s = 0; s < steps; ++s) {
        void* p = rec.time([&] { return checked(a.allocate(48, prev)); });
        kept.push_back({p, 48});
        prev = p;
        if (!rest.empty()) {
            timed_free(a, rest.back(), rec);
            rest.pop_back();
        }
    }
    free_all(a, rest);
    free_all(a, kept);
}

template <class A>
void absent_size(A& a, std::size_t steps, recorder& rec) {
    std::mt19937_64 rng(3);
    static constexpr std::size_t sizes[] = {16, 32, 48, 64, 96, 128, 256, 512};
    std::vector<block> live;
    for (std::size_t i = 0; i < 100'000; ++i) {
        const std::size_t n = sizes[rng() % 8];
        live.push_back({checked(a.allocate(n, live.empty() ? nullptr : live.back().p)), n});
    }
    for (std::size_t s = 0; s < steps; ++s) {
        const block& h = live[rng() % live.size()];
        std::size_t n = sizes[rng() % 8];
        while (n == h.n) n = sizes[rng() % 8];
        const void* hint = h.p;
        void* p = rec.time([&] { return checked(a.allocate(n, hint)); });
        live.push_back({p, n});
        take_random(a, live, rng, &rec);
    }
    free_all(a, live);
}

template <class A>
void aged(A& a, std::size_t steps, recorder& rec) {
    std::mt19937_64 rng(4);
    std::vector<block> live;
    for (std::size_t i = 0; i < 1'000'000; ++i) {
        if (live.size() < 100'000 && (live.empty() || rng() % 100 < 55)) {
            const std::size_t n = aged_size(rng);
            live.push_back({checked(a.allocate(n, live.empty() ? nullptr : live.back().p)), n});
        } else {
            take_random(a, live, rng, nullptr);
        }
    }
    aged_steps(a, live, rng, steps, rec);
    free_all(a, live);
}

template <class A>
void lea_bin(A& a, std::size_t steps, recorder& rec) {
    std::vector<block> sep, kept;
    std::vector<block> bin;
    for (std::size_t i = 0; i < 20'000; ++i) {
        bin.push_back({checked(a.allocate(1040, nullptr)), 1040});
        sep.push_back({checked(a.allocate(16, nullptr)), 16});
    }
    free_all(a, bin);
    const void* prev = sep.back().p;
    for (std::size_t s = 0; s < steps; ++s) {
        if (s % 10 == 9) {
            void* p = rec.time([&] { return checked(a.allocate(1200, prev)); });
            kept.push_back({p, 1200});
            prev = p;
        } else {
            void* p = rec.time([&] { return checked(a.allocate(32, prev)); });
            timed_free(a, {p, 32}, rec);
        }
    }
    free_all(a, sep);
    free_all(a, kept);
}

template <class A>
void holes_1m(A& a, std::size_t steps, recorder& rec) {
    std::mt19937_64 rng(6);
    std::vector<block> all, live;
    all.reserve(1'000'000);
    for (std::size_t i = 0; i < 1'000'000; ++i) all.push_back({checked(a.allocate(32, all.empty() ? nullptr : all.back().p)), 32});
    for (std::size_t i = 0; i < all.size(); ++i) {
        if (i % 2) a.deallocate(all[i].p, 32);
        else live.push_back(all[i]);
    }
    std::vector<block>().swap(all);
    aged_steps(a, live, rng, steps, rec);
    free_all(a, live);
}

struct result {
    double steady_ns, median_ns, p999_ns, max_ns;
};

// The steady state: the median over windows of 64 consecutive operations of
// their mean time. A single cheap operation is near the timer's resolution
// (10 ns steps on some virtual machines); a window's mean is not, and a rare
// slow operation moves one window only.
double steady_state(const std::vector<double>& ns) {
    constexpr std::size_t w = 64;
    std::vector<double> means;
    for (std::size_t i = 0; i + w <= ns.size(); i += w) {
        double sum = 0;
        for (std::size_t k = i; k < i + w; ++k) sum += ns[k];
        means.push_back(sum / w);
    }
    if (means.empty()) return 0.0;
    std::nth_element(means.begin(), means.begin() + static_cast<std::ptrdiff_t>(means.size() / 2), means.end());
    return means[means.size() / 2];
}

// `ns` receives the operations' times in the order they ran.
template <class A>
bool run_pattern(A& a, const std::string& pattern, std::size_t steps, const clock_model& clk, result& out,
                 std::vector<double>& ns) {
    recorder rec;
    rec.samples.reserve(4 * steps + 16);
    if (pattern == "alternating") alternating(a, steps, rec);
    else if (pattern == "every_other") every_other(a, steps, rec);
    else if (pattern == "absent_size") absent_size(a, steps, rec);
    else if (pattern == "aged") aged(a, steps, rec);
    else if (pattern == "lea_bin") lea_bin(a, steps, rec);
    else if (pattern == "holes_1m") holes_1m(a, steps, rec);
    else return false;
    ns.resize(rec.samples.size());
    for (std::size_t i = 0; i < ns.size(); ++i)
        ns[i] = std::max(0.0, (static_cast<double>(rec.samples[i]) - clk.overhead_ticks) * clk.ns_per_tick);
    std::vector<double> sorted = ns;
    std::sort(sorted.begin(), sorted.end());
    out = {steady_state(ns), sorted[sorted.size() / 2], sorted[std::min(sorted.size() - 1, sorted.size() * 999 / 1000)],
           sorted.back()};
    return true;
}

// The slowest operation that was slow in every rep: each step's fastest time
// over the reps, then the slowest of those. The reps run the same operations
// in the same order, so an allocator's own slow step (a walk over classes, a
// refill that maps and faults in memory) is slow in each of them, while an
// interrupt or a descheduling lands on one rep's step and not on the others'.
// A slow step that does not recur at the same place (a sweep triggered by the
// clock) is in the per-rep slowest only.
struct repeatable {
    std::vector<double> fastest;   // per step
    void add(const std::vector<double>& ns) {
        if (fastest.empty()) fastest = ns;
        else
            for (std::size_t i = 0; i < std::min(ns.size(), fastest.size()); ++i)
                fastest[i] = std::min(fastest[i], ns[i]);
    }
    double slowest() const { return fastest.empty() ? 0.0 : *std::max_element(fastest.begin(), fastest.end()); }
};

template <class A>
int run(const std::string& heap, const std::string& pattern, std::size_t steps, int reps) {
    const clock_model clk = calibrate();
    std::string out = "{\"heap\":\"" + heap + "\",\"malloc_library\":\"" + allotheque::tools::malloc_library() +
                      "\",\"pattern\":\"" + pattern + "\",\"steps\":" + std::to_string(steps) +
                      ",\"resolution_ns\":" + std::to_string(clk.resolution_ns) + ",\"reps\":[";
    repeatable rep;
    std::vector<double> ns;
    // One allocator for all the reps, as malloc is one for the whole process:
    // each rep frees everything it allocated, and the next one finds the
    // memory the previous one faulted in, whichever allocator runs.
    A a;
    for (int r = 0; r < reps; ++r) {
        result res{};
        if (!run_pattern<A>(a, pattern, steps, clk, res, ns)) {
            std::fprintf(stderr, "cliff_bench: unknown pattern '%s'\n", pattern.c_str());
            return 64;
        }
        char buf[200];
        std::snprintf(buf, sizeof buf,
                      "%s{\"steady_ns\":%.1f,\"median_ns\":%.1f,\"p999_ns\":%.1f,\"max_ns\":%.1f}", r ? "," : "",
                      res.steady_ns, res.median_ns, res.p999_ns, res.max_ns);
        out += buf;
        rep.add(ns);
    }
    std::printf("%s],\"repeatable_max_ns\":%.1f}\n", out.c_str(), rep.slowest());
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    std::string heap = "malloc", pattern = "alternating";
    std::size_t steps = 100'000;
    int reps = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string k = argv[i], v = argv[i + 1];
        if (k == "--heap") heap = v;
        else if (k == "--pattern") pattern = v;
        else if (k == "--steps") steps = std::strtoull(v.c_str(), nullptr, 10);
        else if (k == "--reps") reps = std::atoi(v.c_str());
        else {
            std::fprintf(stderr, "usage: cliff_bench --pattern alternating|every_other|absent_size|aged|lea_bin|"
                                 "holes_1m --heap malloc|velox|medius|lea [--steps N] [--reps R]\n");
            return 64;
        }
    }
    if (steps == 0 || reps <= 0) {
        std::fprintf(stderr, "cliff_bench: --steps and --reps must be positive\n");
        return 64;
    }
    if (heap == "malloc") return run<malloc_heap>(heap, pattern, steps, reps);
    if (heap == "velox") return run<direct_heap<al::velox_heap<>>>(heap, pattern, steps, reps);
    if (heap == "medius") return run<direct_heap<al::medius_heap<>>>(heap, pattern, steps, reps);
    if (heap == "lea") return run<direct_heap<al::lea_heap<>>>(heap, pattern, steps, reps);
    std::fprintf(stderr, "cliff_bench: unknown heap '%s'\n", heap.c_str());
    return 64;
}
