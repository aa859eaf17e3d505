// summary_trace_gen OUT [EVENTS [THREADS]]
//
// Writes a synthetic trace (trace/builder.hpp) for the summary/HTML tests,
// with a MAPS record naming files that do not exist, so the sites come out as
// module+offset whatever machine runs the test:
//
//   12 sites in /opt/synthetic/bin/app          small objects (8..96 B)
//    7 sites in /opt/synthetic/lib/libfoo.so    larger buffers (256..4096 B)
//    1 site  in /opt/synthetic/lib/</script><b>evil.so   (escaping check)
//
// Live memory ramps up to a peak in the middle of the run and falls back;
// two threads; some calloc/realloc/new/new[]; a few objects never freed.
// Default 30000 events: more than the 2000 plot points, so the series is
// downsampled. With THREADS, the events are dealt out in consecutive runs to
// that many threads, as a thread-per-request server would make them
// (bench/trace/summary_cost.py).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <allotheque/trace/builder.hpp>

namespace tr = allotheque::trace;

namespace {

struct lcg {
    std::uint64_t x = 0x2545f4914f6cdd1dull;
    std::uint64_t next() {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        return x >> 33;
    }
    std::uint64_t below(std::uint64_t n) { return next() % n; }
};

struct site {
    std::uint64_t address;
    std::vector<std::uint64_t> sizes;
    tr::op alloc, release;
    unsigned weight;
};

struct live_object {
    std::uint64_t address, size;
    std::size_t site;
};

} // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fputs("usage: summary_trace_gen OUT [EVENTS [THREADS]]\n", stderr);
        return 2;
    }
    const std::uint64_t events = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 30000;
    const std::uint64_t threads = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 0;

    const std::uint64_t app = 0x555555556000ull, foo = 0x7f0000000000ull, evil = 0x7f0000100000ull;
    std::vector<site> sites;
    for (unsigned k = 0; k < 12; ++k) {
        std::vector<std::uint64_t> sizes = {8u * (k + 1)};
        if (k % 3 == 0) sizes.push_back(8u * (k + 1) + 4);
        const tr::op a = k % 4 == 1 ? tr::op::new_ : k % 4 == 2 ? tr::op::calloc_ : tr::op::malloc_;
        const tr::op r = a == tr::op::new_ ? tr::op::delete_ : tr::op::free_;
        sites.push_back({app + 0x100 * k + 0x1b, sizes, a, r, 30u - 2 * k});
    }
    for (unsigned k = 0; k < 7; ++k) {
        std::vector<std::uint64_t> sizes = {256u << (k % 5)};
        if (k % 2) sizes.push_back((256u << (k % 5)) + 100);
        const tr::op a = k == 3 ? tr::op::new_array : tr::op::malloc_;
        const tr::op r = a == tr::op::new_array ? tr::op::delete_array : tr::op::free_;
        sites.push_back({foo + 0x200 * k + 0x2c, sizes, a, r, 4});
    }
    sites.push_back({evil + 0x40, {48}, tr::op::malloc_, tr::op::free_, 3});
    unsigned total_weight = 0;
    for (const auto& s : sites) total_weight += s.weight;

    tr::builder b("/opt/synthetic/bin/app", {"app", "--synthetic", "<input & output>"});
    b.maps("555555554000-555555556000 r--p 00000000 08:01 1001 /opt/synthetic/bin/app\n"
           "555555556000-55555555a000 r-xp 00002000 08:01 1001 /opt/synthetic/bin/app\n"
           "7f0000000000-7f0000010000 r-xp 00000000 08:01 1002 /opt/synthetic/lib/libfoo.so\n"
           "7f0000100000-7f0000110000 r-xp 00000000 08:01 1003 /opt/synthetic/lib/</script><b>evil.so\n"
           "7ffff7fc1000-7ffff7fc3000 r-xp 00000000 00:00 0 [vdso]\n");

    lcg rng;
    std::vector<live_object> live;
    std::uint64_t time = 1000, next_address = 0x10000000;
    for (std::uint64_t i = 0; i < events; ++i) {
        time += 40 + rng.below(120);
        const auto thread = threads ? static_cast<std::uint32_t>(i * threads / events)
                                    : std::uint32_t((i / 64) % 3 == 2 ? 1 : 0);
        // Allocate more in the first half, free more in the second.
        const bool first_half = i < events / 2;
        const unsigned alloc_pct = first_half ? 62 : 38;
        const bool do_alloc = live.empty() || rng.below(100) < alloc_pct;
        if (do_alloc) {
            unsigned w = static_cast<unsigned>(rng.below(total_weight));
            std::size_t k = 0;
            while (w >= sites[k].weight) w -= sites[k++].weight;
            const auto& s = sites[k];
            const std::uint64_t size = s.sizes[rng.below(s.sizes.size())];
            const std::uint64_t addr = next_address;
            next_address += (size + 31) / 16 * 16;
            b.add(s.alloc, time, addr, size, s.address, thread);
            live.push_back({addr, size, k});
        } else {
            const std::size_t j = rng.below(live.size());
            const live_object o = live[j];
            live[j] = live.back();
            live.pop_back();
            const auto& s = sites[o.site];
            if (s.alloc == tr::op::malloc_ && rng.below(8) == 0) {
                // Grow it with realloc instead of freeing it (the object stays live).
                const std::uint64_t addr = next_address;
                next_address += (o.size * 2 + 31) / 16 * 16;
                b.add(tr::op::realloc_, time, addr, o.size * 2, s.address, thread, o.address);
                live.push_back({addr, o.size * 2, o.site});
            } else {
                b.add(s.release, time, o.address, 0, s.address + 0x1000, thread);
            }
        }
    }
    // Tidy up most of what is left; keep every 10th object as a leak.
    for (std::size_t j = 0; j < live.size(); ++j) {
        if (j % 10 == 0) continue;
        time += 50;
        b.add(sites[live[j].site].release, time, live[j].address, 0, 0, 0);
    }
    const auto bytes = b.finish();
    std::ofstream f(argv[1], std::ios::binary | std::ios::trunc);
    if (!f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()))) {
        std::fprintf(stderr, "summary_trace_gen: cannot write %s\n", argv[1]);
        return 1;
    }
    return 0;
}
