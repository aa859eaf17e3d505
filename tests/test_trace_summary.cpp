// allotheque-trace summary (tools/trace/summary.hpp, symbolize.hpp,
// html_report.hpp) on synthetic traces with known answers.
#include "catch.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <allotheque/trace/builder.hpp>

#include "summary.hpp"

namespace tr = allotheque::trace;
namespace at = allotheque::tools;

namespace {

tr::trace parse(const std::vector<std::byte>& bytes) { return tr::parse_trace(bytes); }

at::summary summarise(tr::builder& b, const at::summary_options& opt = {}) {
    return at::summarise(parse(b.finish()), opt);
}

const at::site_stats& site(const at::summary& s, std::uint64_t address) {
    for (const auto& x : s.sites)
        if (x.site == address) return x;
    FAIL("no site " << address);
    return s.sites.front();
}

std::uint64_t count_of(const std::vector<at::range_bucket>& v, std::uint64_t value) {
    for (const auto& b : v)
        if (value >= b.lo && value < b.hi) return b.count;
    return ~std::uint64_t(0);
}

std::size_t occurrences(const std::string& hay, const std::string& needle) {
    std::size_t n = 0;
    for (auto p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
    return n;
}

// A temporary file removed at scope exit.
struct temp_file {
    std::string path;
    explicit temp_file(const std::vector<std::byte>& bytes) {
        char name[] = "/tmp/test_trace_summary-XXXXXX";
        const int fd = ::mkstemp(name);
        REQUIRE(fd >= 0);
        ::close(fd);
        path = name;
        std::ofstream f(path, std::ios::binary | std::ios::trunc);
        f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    }
    ~temp_file() { std::remove(path.c_str()); }
};

// Runs summary_main and captures what it prints.
struct cli_result {
    int status = 0;
    std::string out, err;
};
cli_result run_cli(std::vector<std::string> args) {
    args.insert(args.begin(), "summary");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::FILE* out = std::tmpfile();
    std::FILE* err = std::tmpfile();
    REQUIRE(out);
    REQUIRE(err);
    cli_result r;
    r.status = at::summary_main(int(args.size()), argv.data(), out, err);
    auto slurp = [](std::FILE* f) {
        std::string s;
        std::rewind(f);
        char buf[4096];
        for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) s.append(buf, n);
        std::fclose(f);
        return s;
    };
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
}

[[gnu::noinline]] int summary_test_marker(int x) {
    static volatile int sink = 0;
    sink = sink + x;
    return sink;
}

} // namespace

TEST_CASE("peak live bytes and objects, and when", "[trace][summary]") {
    tr::builder b;
    b.add(tr::op::malloc_, 10, 0x1000, 100, 0xa0)   // 100
        .add(tr::op::malloc_, 20, 0x2000, 200, 0xb0)  // 300  <- peak bytes, 2 objects
        .add(tr::op::free_, 30, 0x1000)               // 200
        .add(tr::op::malloc_, 40, 0x3000, 50, 0xa0)   // 250, 2 objects again (not a new peak)
        .add(tr::op::free_, 50, 0x2000)               // 50
        .add(tr::op::free_, 60, 0x3000);              // 0
    const auto s = summarise(b);
    CHECK(s.allocations == 3);
    CHECK(s.frees == 3);
    CHECK(s.bytes_requested == 350);
    CHECK(s.peak_live_bytes == 300);
    CHECK(s.peak_bytes_time_ns == 20);
    CHECK(s.peak_bytes_event == 1);
    CHECK(s.peak_bytes_objects == 2);
    CHECK(s.peak_live_objects == 2);
    CHECK(s.peak_objects_time_ns == 20);
    CHECK(s.never_freed == 0);
    CHECK(s.never_freed_bytes == 0);
    CHECK(s.by_op[0] == 3);   // malloc
    CHECK(s.by_op[16] == 3);  // free
    // Per-site peaks: site 0xa0 never has both of its objects live at once.
    CHECK(site(s, 0xa0).peak_live_bytes == 100);
    CHECK(site(s, 0xb0).peak_live_bytes == 200);
    // The series: one point per event (plus the origin), ending at zero.
    REQUIRE(s.series.size() == 7);
    CHECK(s.series[2].bytes == 300);
    CHECK(s.series.back().bytes == 0);
    CHECK(s.series.back().time_ns == 60);
}

TEST_CASE("never-freed objects stay live at the end", "[trace][summary]") {
    tr::builder b;
    b.add(tr::op::new_, 1, 0x10, 24, 0x1).add(tr::op::new_, 2, 0x20, 24, 0x1).add(tr::op::delete_, 3, 0x10);
    const auto s = summarise(b);
    CHECK(s.never_freed == 1);
    CHECK(s.never_freed_bytes == 24);
    CHECK(site(s, 0x1).never_freed == 1);
    CHECK(site(s, 0x1).never_freed_bytes == 24);
    CHECK(site(s, 0x1).freed == 1);
    CHECK(s.freed_objects == 1);
}

TEST_CASE("size histogram: power-of-two buckets and small-object shares", "[trace][summary]") {
    CHECK(at::size_bucket_index(0) == 0);
    CHECK(at::size_bucket_index(1) == 1);
    CHECK(at::size_bucket_index(2) == 2);
    CHECK(at::size_bucket_index(3) == 3);
    CHECK(at::size_bucket_index(4) == 3);
    CHECK(at::size_bucket_index(5) == 4);
    CHECK(at::size_bucket_index(8) == 4);
    CHECK(at::size_bucket_index(9) == 5);
    CHECK(at::size_bucket_lo(5) == 9);
    CHECK(at::size_bucket_hi(5) == 16);
    // The top buckets: found by the trace fuzzer (a shift by 64).
    CHECK(at::size_bucket_index(~std::uint64_t(0)) == 65);
    CHECK(at::size_bucket_hi(65) == ~std::uint64_t(0));
    CHECK(at::size_bucket_lo(65) == (std::uint64_t(1) << 63) + 1);
    CHECK(at::size_bucket_hi(64) == std::uint64_t(1) << 63);
    CHECK(at::glibc_chunk_bytes(1) == 32);
    CHECK(at::glibc_chunk_bytes(24) == 32);
    CHECK(at::glibc_chunk_bytes(25) == 48);

    tr::builder b;
    const std::uint64_t sizes[] = {8, 8, 9, 16, 17, 64, 65, 256, 257, 1000};
    std::uint64_t t = 1, a = 0x1000;
    for (auto sz : sizes) b.add(tr::op::malloc_, t++, a += 0x1000, sz, 0x42);
    const auto s = summarise(b);
    // Buckets 5-8, 9-16, 17-32, 33-64, 65-128, 129-256, 257-512, 513-1024: contiguous.
    REQUIRE(s.histogram.size() == 8);
    CHECK(s.histogram[0].lo == 5);
    CHECK(s.histogram[0].hi == 8);
    CHECK(s.histogram[0].count == 2);
    CHECK(s.histogram[0].bytes == 16);
    CHECK(s.histogram[1].count == 2);  // 9, 16
    CHECK(s.histogram[2].count == 1);  // 17
    CHECK(s.histogram[3].count == 1);  // 64
    CHECK(s.histogram[4].count == 1);  // 65
    CHECK(s.histogram[5].count == 1);  // 256
    CHECK(s.histogram[6].count == 1);  // 257
    CHECK(s.histogram[7].lo == 513);
    CHECK(s.histogram[7].hi == 1024);
    CHECK(s.histogram[7].count == 1);
    CHECK(s.small64 == 6);
    CHECK(s.small64_bytes == 8 + 8 + 9 + 16 + 17 + 64);
    CHECK(s.small256 == 8);
    REQUIRE(!s.top_sizes.empty());
    CHECK(s.top_sizes[0].size == 8);
    CHECK(s.top_sizes[0].count == 2);
    const auto& x = site(s, 0x42);
    CHECK(x.min_size == 8);
    CHECK(x.max_size == 1000);
    CHECK(x.distinct_sizes == 9);
    CHECK(x.sizes.front().size == 8);
    CHECK(x.sizes.front().count == 2);
}

TEST_CASE("lifetimes in ns and in allocations in between", "[trace][summary]") {
    tr::builder b;
    b.add(tr::op::malloc_, 100, 0x10, 8, 0x1)     // A
        .add(tr::op::malloc_, 110, 0x20, 8, 0x1)  // B
        .add(tr::op::malloc_, 120, 0x30, 8, 0x1)  // C
        .add(tr::op::free_, 1100, 0x10)           // A: 1000 ns, 2 allocations in between
        .add(tr::op::free_, 1150, 0x30)           // C: 1030 ns, 0 in between
        .add(tr::op::malloc_, 2000, 0x40, 8, 0x2) // D
        .add(tr::op::free_, 2050, 0x40);          // D: 50 ns, 0 in between
    const auto s = summarise(b);
    CHECK(s.freed_objects == 3);
    CHECK(s.never_freed == 1);  // B
    CHECK(count_of(s.lifetime_ns, 50) == 1);
    CHECK(count_of(s.lifetime_ns, 1000) == 2);  // [1 us, 10 us)
    CHECK(count_of(s.lifetime_allocs, 0) == 2);
    CHECK(count_of(s.lifetime_allocs, 2) == 1);  // [2, 4)
    CHECK(s.median_lifetime_ns == 1000);
    CHECK(s.median_lifetime_allocs == 0);
    CHECK(s.short_lived_ns_count == 1);     // < 1 us: D
    CHECK(s.short_lived_allocs_count == 3); // all before 16 more allocations
    CHECK(site(s, 0x1).has_lifetime);
    CHECK(site(s, 0x1).median_lifetime_ns == 1030);  // {1000, 1030}: the upper middle
    CHECK(site(s, 0x2).median_lifetime_ns == 50);
    // The buckets cover everything once: decades up to >= 10 s, powers of two up to >= 2^20.
    CHECK(s.lifetime_ns.front().lo == 0);
    CHECK(s.lifetime_ns.back().lo == 10'000'000'000ull);
    CHECK(s.lifetime_ns.back().hi == UINT64_MAX);
    CHECK(s.lifetime_allocs.back().lo == (1u << 20));
}

TEST_CASE("top sites by count and by bytes", "[trace][summary]") {
    tr::builder b;
    std::uint64_t t = 1, a = 0;
    for (int i = 0; i < 5; ++i) b.add(tr::op::malloc_, t++, a += 0x100, 8, 0x111);
    for (int i = 0; i < 2; ++i) b.add(tr::op::malloc_, t++, a += 0x100, 1000, 0x222);
    for (int i = 0; i < 3; ++i) b.add(tr::op::malloc_, t++, a += 0x100, 16, 0x333);
    const auto s = summarise(b);
    REQUIRE(s.sites.size() == 3);
    CHECK(s.sites[0].site == 0x111);  // 5 allocations
    CHECK(s.sites[1].site == 0x333);  // 3
    CHECK(s.sites[2].site == 0x222);  // 2
    const auto by_bytes = at::sites_by_bytes(s, 10);
    REQUIRE(by_bytes.size() == 3);
    CHECK(s.sites[by_bytes[0]].site == 0x222);  // 2000 B
    CHECK(s.sites[by_bytes[1]].site == 0x333);  // 48 B
    CHECK(s.sites[by_bytes[2]].site == 0x111);  // 40 B
    CHECK(at::sites_by_bytes(s, 1).size() == 1);
    const std::string text = at::format_text(s, {}, 2);
    CHECK(text.find("Top 2 call sites by count (of 3 sites)") != std::string::npos);
    CHECK(text.find("Top 2 call sites by bytes") != std::string::npos);
}

TEST_CASE("unknown, null and mismatched frees; failed allocations", "[trace][summary]") {
    tr::builder b;
    b.add(tr::op::malloc_, 1, 0x10, 8, 0x1)
        .add(tr::op::free_, 2, 0xdead)                   // never handed out
        .add(tr::op::free_, 3, 0)                        // free(NULL)
        .add(tr::op::new_, 4, 0x20, 16, 0x2)
        .add(tr::op::free_, 5, 0x20)                     // new + free
        .add(tr::op::malloc_, 6, 0, 1u << 30, 0x3, 0, 0, 0, true)  // failed
        .add(tr::op::free_, 7, 0x10);
    const auto s = summarise(b);
    CHECK(s.unknown_frees == 1);
    CHECK(s.null_frees == 1);
    CHECK(s.frees == 3);  // non-null frees
    CHECK(s.mismatched_frees == 1);
    CHECK(s.failed == 1);
    CHECK(site(s, 0x3).failed == 1);
    CHECK(site(s, 0x3).count == 0);
    CHECK(s.allocations == 2);
    const std::string text = at::format_text(s, {}, 5);
    CHECK(text.find("unknown frees       1") != std::string::npos);
    CHECK(text.find("mismatched frees") != std::string::npos);
}

// The Totals lines list their parts by operation: the parts add up to the
// total, free(NULL) (and a failed allocation) being in neither.
TEST_CASE("the parts of allocations and frees add up to them", "[trace][summary]") {
    tr::builder b;
    b.add(tr::op::malloc_, 1, 0x10, 8, 0x1)
        .add(tr::op::malloc_, 2, 0x30, 8, 0x1)
        .add(tr::op::free_, 3, 0)                                  // free(NULL)
        .add(tr::op::free_, 4, 0)                                  // free(NULL)
        .add(tr::op::delete_, 5, 0)                                // delete of a null pointer
        .add(tr::op::new_, 6, 0x20, 16, 0x2)
        .add(tr::op::malloc_, 7, 0, 1u << 30, 0x3, 0, 0, 0, true)  // failed
        .add(tr::op::realloc_, 8, 0, 0, 0x4, 0, 0x30)              // realloc(p, 0): frees p
        .add(tr::op::free_, 9, 0x10)
        .add(tr::op::delete_, 10, 0x20);
    const auto s = summarise(b);
    CHECK(s.allocations == 3);
    CHECK(s.frees == 2);
    CHECK(s.null_frees == 3);
    CHECK(s.by_op[std::uint8_t(tr::op::free_)] == 3);  // calls, free(NULL) included
    CHECK(s.frees_by_op[std::uint8_t(tr::op::free_)] == 1);
    CHECK(s.frees_by_op[std::uint8_t(tr::op::delete_)] == 1);
    CHECK(s.allocations_by_op[std::uint8_t(tr::op::malloc_)] == 2);
    CHECK(s.allocations_by_op[std::uint8_t(tr::op::new_)] == 1);
    CHECK(s.allocations_by_op[std::uint8_t(tr::op::realloc_)] == 0);
    const std::string text = at::format_text(s, {}, 5);
    INFO(text);
    CHECK(text.find("allocations         3   (malloc 2, new 1)\n") != std::string::npos);
    CHECK(text.find("frees               2   (free 1, delete 1)   not counted: 3 of NULL\n") != std::string::npos);
    CHECK(text.find("null frees          3\n") != std::string::npos);
    const std::string html = at::html_report(s, {});
    CHECK(html.find("\"alloc_ops\":{\"malloc\":2,\"new\":1}") != std::string::npos);
    CHECK(html.find("\"free_ops\":{\"free\":1,\"delete\":1}") != std::string::npos);
}

TEST_CASE("realloc: moves, in place, from NULL, to size 0", "[trace][summary]") {
    tr::builder b;
    b.add(tr::op::malloc_, 1, 0x100, 10, 0x1)
        .add(tr::op::realloc_, 2, 0x200, 100, 0x2, 0, 0x100)  // moved: 10 -> 100
        .add(tr::op::realloc_, 3, 0x200, 120, 0x2, 0, 0x200)  // in place: 100 -> 120
        .add(tr::op::realloc_, 4, 0x300, 50, 0x3, 0, 0)       // realloc(NULL, 50)
        .add(tr::op::realloc_, 5, 0, 0, 0x4, 0, 0x300)        // realloc(p, 0): freed
        .add(tr::op::free_, 6, 0x200);
    const auto s = summarise(b);
    CHECK(s.reallocs == 4);
    CHECK(s.realloc_moved == 1);
    CHECK(s.realloc_in_place == 1);
    CHECK(s.realloc_from_null == 1);
    CHECK(s.realloc_to_zero == 1);
    CHECK(s.allocations == 4);  // malloc + three realloc results
    CHECK(s.unknown_frees == 0);
    CHECK(s.never_freed == 0);
    // Live bytes: 10, 100, 120, 170, 120, 0 -- a realloc replaces, never adds.
    CHECK(s.peak_live_bytes == 170);
    CHECK(s.peak_live_objects == 2);
    CHECK(site(s, 0x2).count == 2);
    CHECK(site(s, 0x2).peak_live_bytes == 120);
    CHECK(s.series.back().bytes == 0);
}

TEST_CASE("threads are counted apart", "[trace][summary]") {
    tr::builder b;
    b.add(tr::op::malloc_, 1, 0x10, 8, 0x1, 0).add(tr::op::malloc_, 2, 0x20, 16, 0x1, 1).add(tr::op::free_, 3, 0x10, 0, 0, 1);
    const auto s = summarise(b);
    REQUIRE(s.threads.size() == 2);
    CHECK(s.threads[0].thread == 0);
    CHECK(s.threads[0].allocations == 1);
    CHECK(s.threads[0].frees == 0);
    CHECK(s.threads[1].thread == 1);
    CHECK(s.threads[1].os_tid == 1001);
    CHECK(s.threads[1].allocations == 1);
    CHECK(s.threads[1].bytes == 16);
    CHECK(s.threads[1].frees == 1);
    CHECK(s.threads[1].events == 2);
}

TEST_CASE("large traces: the series is downsampled and keeps the peak", "[trace][summary]") {
    tr::builder b;
    std::uint64_t t = 0;
    std::vector<std::uint64_t> live;
    // A saw-tooth with one tall spike in the middle.
    for (int round = 0; round < 50; ++round) {
        const int n = round == 25 ? 400 : 100;
        for (int i = 0; i < n; ++i) {
            const std::uint64_t a = 0x10000 + std::uint64_t(round) * 0x100000 + std::uint64_t(i) * 0x100;
            b.add(tr::op::malloc_, t += 7, a, 32, 0x1);
            live.push_back(a);
        }
        for (auto a : live) b.add(tr::op::free_, t += 7, a);
        live.clear();
    }
    at::summary_options opt;
    opt.max_points = 200;
    const auto s = summarise(b, opt);
    CHECK(s.events == 2 * (49 * 100 + 400));
    CHECK(s.peak_live_bytes == 400 * 32);
    CHECK(s.peak_live_objects == 400);
    REQUIRE(s.series.size() <= 201);
    std::uint64_t max_bytes = 0, max_objects = 0;
    for (std::size_t i = 0; i < s.series.size(); ++i) {
        max_bytes = std::max(max_bytes, s.series[i].bytes);
        max_objects = std::max(max_objects, s.series[i].objects);
        if (i) CHECK(s.series[i].time_ns >= s.series[i - 1].time_ns);
    }
    CHECK(max_bytes == s.peak_live_bytes);
    CHECK(max_objects == s.peak_live_objects);
    CHECK(s.series.back().bytes == 0);  // the last value of the last interval
}

namespace {

// A random trace with everything the summary has to sort out: several
// threads, sampled times, every allocation op, reallocs (moving, in place,
// from NULL, to size 0), frees of unknown addresses and of NULL, failures,
// mismatched and lost frees. Addresses come from a small pool, so they are
// reused often.
std::vector<std::byte> random_trace(std::mt19937_64& rng, std::size_t n) {
    tr::builder b("/bin/random", {"random"});
    if (rng() % 2) b.block_flags(tr::block_flag_sampled_time);
    const unsigned threads = 1 + unsigned(rng() % 4);
    const tr::op allocs[] = {tr::op::malloc_, tr::op::calloc_, tr::op::new_, tr::op::new_array, tr::op::memalign_};
    const tr::op frees[] = {tr::op::free_, tr::op::delete_, tr::op::delete_array};
    std::vector<std::uint64_t> live;
    std::uint64_t t = 100;
    auto address = [&] { return 0x10000 + (rng() % 2000) * 64; };
    for (std::size_t i = 0; i < n; ++i) {
        t += rng() % 8 ? rng() % 300 : 0;
        const auto th = std::uint32_t(rng() % threads);
        const std::uint64_t site = 0x400000 + (rng() % 30) * 16;
        const unsigned r = unsigned(rng() % 100);
        if (r < 45 || live.empty()) {
            const bool failed = rng() % 40 == 0;
            const std::uint64_t a = failed ? 0 : address();
            b.add(allocs[rng() % 5], t, a, rng() % 4 ? rng() % 200 : rng() % 100000, site, th, 0, rng() % 8 ? 0 : 6,
                  failed);
            if (!failed) live.push_back(a);
        } else if (r < 85) {
            const std::size_t k = rng() % live.size();
            const std::uint64_t a = rng() % 25 == 0 ? 0x999990 : live[k];
            live[k] = live.back();
            live.pop_back();
            b.add(frees[rng() % 3], t, a, 0, site, th);
        } else if (r < 95) {
            const std::size_t k = rng() % live.size();
            const std::uint64_t old = rng() % 10 ? live[k] : 0;
            if (rng() % 8 == 0) {
                b.add(tr::op::realloc_, t, 0, 0, site, th, old);
                live[k] = live.back();
                live.pop_back();
            } else {
                const std::uint64_t a = rng() % 3 ? address() : old ? old : address();
                b.add(tr::op::realloc_, t, a, rng() % 5000, site, th, old);
                live[k] = a;
            }
        } else {
            b.add(tr::op::free_, t, 0, 0, site, th);
        }
    }
    return b.finish();
}

// What the summary should say, computed the plain way: a std::map of live
// addresses and whole lists of lifetimes.
struct reference {
    struct site_ref {
        std::uint64_t count = 0, bytes = 0, freed = 0, live = 0, peak = 0, failed = 0;
        std::vector<std::uint64_t> lives;
    };
    struct obj {
        std::uint64_t size, site, born_ns, birth;
        tr::op kind;
    };
    std::uint64_t allocations = 0, frees = 0, null_frees = 0, unknown = 0, lost = 0, failed = 0, mismatched = 0;
    std::uint64_t bytes = 0, live_bytes = 0, peak_bytes = 0, peak_bytes_event = 0, live_objects = 0, peak_objects = 0;
    std::map<std::uint64_t, site_ref> sites;
    std::map<std::uint32_t, std::array<std::uint64_t, 4>> threads;  // events, allocations, bytes, frees
    std::vector<std::uint64_t> lives, between;

    explicit reference(const tr::trace& t) {
        std::map<std::uint64_t, obj> live;
        std::uint64_t births = 0;
        auto end = [&](std::map<std::uint64_t, obj>::iterator it, std::uint64_t now, bool lost, tr::op by) {
            const obj& o = it->second;
            if (!lost && at::detail::mismatched(o.kind, by)) ++mismatched;
            live_bytes -= o.size;
            --live_objects;
            auto& st = sites[o.site];
            st.live -= o.size;
            ++st.freed;
            st.lives.push_back(now - o.born_ns);
            lives.push_back(now - o.born_ns);
            between.push_back(births - o.birth - 1);
            live.erase(it);
        };
        for (std::size_t i = 0; i < t.events.size(); ++i) {
            const auto& e = t.events[i];
            auto& th = threads[e.thread];
            ++th[0];
            if (tr::is_free(e.kind)) {
                if (e.address == 0) {
                    ++null_frees;
                } else {
                    ++frees;
                    ++th[3];
                    if (auto it = live.find(e.address); it != live.end()) end(it, e.time_ns, false, e.kind);
                    else ++unknown;
                }
            } else if (e.failed) {
                ++failed;
                ++sites[e.site].failed;
            } else {
                if (e.kind == tr::op::realloc_ && e.old_address) {
                    if (auto it = live.find(e.old_address); it != live.end()) end(it, e.time_ns, false, tr::op::free_);
                    else ++unknown;
                }
                if (e.address) {
                    if (auto it = live.find(e.address); it != live.end()) {
                        ++lost;
                        end(it, e.time_ns, true, e.kind);
                    }
                    live[e.address] = obj{e.size, e.site, e.time_ns, births++, e.kind};
                    ++allocations;
                    bytes += e.size;
                    ++th[1];
                    th[2] += e.size;
                    live_bytes += e.size;
                    ++live_objects;
                    auto& st = sites[e.site];
                    ++st.count;
                    st.bytes += e.size;
                    st.live += e.size;
                    st.peak = std::max(st.peak, st.live);
                }
            }
            if (live_bytes > peak_bytes) {
                peak_bytes = live_bytes;
                peak_bytes_event = i;
            }
            peak_objects = std::max(peak_objects, live_objects);
        }
    }
    static std::uint64_t median(std::vector<std::uint64_t> v) {
        if (v.empty()) return 0;
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    }
};

} // namespace

TEST_CASE("the summary agrees with a plain reference on random traces", "[trace][summary]") {
    std::mt19937_64 rng(99);
    for (int round = 0; round < 12; ++round) {
        const auto bytes = random_trace(rng, 500 + rng() % 6000);
        const auto t = parse(bytes);
        const reference want(t);
        // The command streams the trace; the tests and the fuzzer summarise a
        // parsed one: both must say the same.
        const auto s = at::summarise(tr::trace_reader(bytes));
        const auto again = at::summarise(t);
        CHECK(at::format_text(s, {}, 50) == at::format_text(again, {}, 50));
        INFO("round " << round);
        CHECK(s.events == t.events.size());
        CHECK(s.allocations == want.allocations);
        CHECK(s.frees == want.frees);
        CHECK(s.null_frees == want.null_frees);
        CHECK(s.unknown_frees == want.unknown);
        CHECK(s.reused_live == want.lost);
        CHECK(s.failed == want.failed);
        CHECK(s.mismatched_frees == want.mismatched);
        CHECK(std::accumulate(s.allocations_by_op.begin(), s.allocations_by_op.end(), std::uint64_t(0)) ==
              s.allocations);
        CHECK(std::accumulate(s.frees_by_op.begin(), s.frees_by_op.end(), std::uint64_t(0)) == s.frees);
        CHECK(s.bytes_requested == want.bytes);
        CHECK(s.peak_live_bytes == want.peak_bytes);
        CHECK(s.peak_bytes_event == want.peak_bytes_event);
        CHECK(s.peak_live_objects == want.peak_objects);
        CHECK(s.never_freed == want.live_objects);
        CHECK(s.never_freed_bytes == want.live_bytes);
        CHECK(s.freed_objects == want.lives.size());
        CHECK(s.median_lifetime_ns == reference::median(want.lives));
        CHECK(s.median_lifetime_allocs == reference::median(want.between));
        REQUIRE(s.threads.size() == want.threads.size());
        for (const auto& th : s.threads) {
            const auto& w = want.threads.at(th.thread);
            CHECK(th.events == w[0]);
            CHECK(th.allocations == w[1]);
            CHECK(th.bytes == w[2]);
            CHECK(th.frees == w[3]);
        }
        REQUIRE(s.sites.size() == want.sites.size());
        for (const auto& st : s.sites) {
            const auto& w = want.sites.at(st.site);
            INFO("site " << st.site);
            CHECK(st.count == w.count);
            CHECK(st.bytes == w.bytes);
            CHECK(st.failed == w.failed);
            CHECK(st.freed == w.freed);
            CHECK(st.never_freed == w.count - w.freed);
            CHECK(st.never_freed_bytes == w.live);
            CHECK(st.peak_live_bytes == w.peak);
            CHECK(st.has_lifetime == !w.lives.empty());
            CHECK(st.median_lifetime_ns == reference::median(w.lives));
        }
    }
}

TEST_CASE("150,000 threads: every thread counted, the report lists the busiest", "[trace][summary]") {
    // A server-like trace: each thread allocates a few objects and frees
    // some. Thread ids are hashed, so this is linear (a list scan per event
    // took 20 s here); the text lists 32 threads and sums up the rest, the
    // page embeds 1000.
    constexpr std::uint32_t threads = 150'000;
    tr::builder b;
    std::uint64_t t = 0;
    for (std::uint32_t th = 0; th < threads; ++th) {
        const std::uint32_t n = 1 + th % 3;  // 1, 2 or 3 allocations
        for (std::uint32_t k = 0; k < n; ++k)
            b.add(tr::op::malloc_, ++t, 0x100000 + 64 * (std::uint64_t(th) * 3 + k), 16 * (k + 1), 0x401000 + k, th);
        if (th % 2 == 0) b.add(tr::op::free_, ++t, 0x100000 + 64 * std::uint64_t(th) * 3, 0, 0x401100, th);
    }
    const auto bytes = b.finish();
    const auto s = at::summarise(tr::trace_reader(bytes));
    REQUIRE(s.threads.size() == threads);
    std::uint64_t allocations = 0, frees = 0, total_bytes = 0;
    for (std::uint32_t th = 0; th < threads; ++th) {
        const auto& x = s.threads[th];
        const std::uint32_t n = 1 + th % 3;
        REQUIRE(x.thread == th);
        REQUIRE(x.os_tid == 1000 + th);
        REQUIRE(x.allocations == n);
        REQUIRE(x.bytes == 16 * n * (n + 1) / 2);
        REQUIRE(x.frees == (th % 2 == 0 ? 1u : 0u));
        REQUIRE(x.events == n + x.frees);
        allocations += n;
        frees += x.frees;
        total_bytes += x.bytes;
    }
    CHECK(s.allocations == allocations);
    CHECK(s.frees == frees);
    CHECK(s.bytes_requested == total_bytes);
    CHECK(s.never_freed == allocations - frees);
    CHECK(s.sites.size() == 3);

    // Text: the 32 busiest (4 events: th % 6 == 2, the lowest ids first),
    // then one line for the other 149,968.
    const std::string text = at::format_text(s, {}, 5);
    CHECK(text.find("Threads (150,000; the 32 with the most events)") != std::string::npos);
    const auto section = text.substr(text.find("\nThreads"), text.find("\nTop 3 call sites") - text.find("\nThreads"));
    std::vector<std::vector<std::string>> rows;  // the listed threads, as words
    for (std::size_t p = 0, e; p < section.size(); p = e + 1) {
        e = std::min(section.find('\n', p), section.size());
        std::vector<std::string> words;
        std::string w;
        for (std::size_t k = p; k <= e; ++k) {
            if (k == e || section[k] == ' ') {
                if (!w.empty()) words.push_back(w);
                w.clear();
            } else {
                w += section[k];
            }
        }
        if (!words.empty() && std::isdigit(static_cast<unsigned char>(words[0][0]))) rows.push_back(words);
    }
    REQUIRE(rows.size() == 32);
    for (std::size_t k = 0; k < rows.size(); ++k) {
        const std::uint32_t th = 2 + 6 * std::uint32_t(k);  // 3 allocations and a free; lower ids first
        CHECK(rows[k] == std::vector<std::string>{std::to_string(th), std::to_string(1000 + th), "4", "3", "96", "B", "1"});
    }
    std::uint64_t rest_events = s.events;
    for (std::uint32_t k = 0; k < 32; ++k) rest_events -= 4;
    CHECK(section.find("... and 149,968 more threads: " + at::fmt::integer(rest_events) + " events") !=
          std::string::npos);
    const std::string page = at::html_report(s, {});
    CHECK(page.find("\"threads_total\":150000") != std::string::npos);
    CHECK(occurrences(page, "\"tid\":") == 1000);
}

namespace {

// The column spans of a table header: runs separated by two or more spaces.
std::vector<std::pair<std::size_t, std::size_t>> header_columns(const std::string& h) {
    std::vector<std::pair<std::size_t, std::size_t>> cols;
    std::size_t i = 0;
    while (i < h.size()) {
        while (i < h.size() && h[i] == ' ') ++i;
        if (i >= h.size()) break;
        std::size_t j = i;
        while (j < h.size() && !(h[j] == ' ' && (j + 1 >= h.size() || h[j + 1] == ' '))) ++j;
        cols.push_back({i, j});
        i = j;
    }
    return cols;
}

// The rows of the table whose header line starts with `title` (indented).
std::vector<std::string> table_after(const std::string& text, const std::string& title, std::string& header) {
    const auto at = text.find("\n  " + title);
    REQUIRE(at != std::string::npos);
    std::vector<std::string> rows;
    std::size_t p = at + 1;
    std::size_t e = text.find('\n', p);
    header = text.substr(p, e - p);
    for (p = e + 1; p < text.size(); p = e + 1) {
        e = text.find('\n', p);
        const std::string line = text.substr(p, e - p);
        if (line.size() < 3 || line.compare(0, 2, "  ") != 0 || line.find("top exact sizes") != std::string::npos)
            break;
        rows.push_back(line);
    }
    return rows;
}

// Every right-aligned column ends where its header ends, with two spaces
// after it: no value runs into the next column.
void check_right_aligned(const std::string& text, const std::string& title) {
    std::string header;
    const auto rows = table_after(text, title, header);
    REQUIRE(!rows.empty());
    const auto cols = header_columns(header);
    for (const auto& row : rows) {
        INFO(title << " row: " << row);
        for (std::size_t c = 0; c < cols.size(); ++c) {
            const std::size_t end = cols[c].second;
            const std::string name = header.substr(cols[c].first, end - cols[c].first);
            if (name == "sizes" || name == "site" || name == "size (B)" || name == "lifetime" ||
                name == "allocations in between")
                continue;  // left-aligned
            REQUIRE(row.size() >= end);
            CHECK(row[end - 1] != ' ');
            if (row.size() > end) {
                CHECK(row[end] == ' ');
                CHECK(row[end + 1] == ' ');
            }
        }
    }
}

} // namespace

TEST_CASE("text tables: columns stay apart for values of a GiB and more", "[trace][summary]") {
    // Nothing is allocated: the builder only writes the events. Peak 4.6 GiB
    // live; sizes and means in the billions; a count in the hundreds of
    // thousands.
    tr::builder b;
    std::uint64_t t = 0;
    b.add(tr::op::malloc_, ++t, 0x100000000, 1500ull << 20, 0x401000);      // 1.46 GiB
    b.add(tr::op::malloc_, ++t, 0x200000000, 3ull << 30, 0x402000);         // 3 GiB
    b.add(tr::op::calloc_, ++t, 0x300000000, 1234567890123ull, 0x403000);  // 1.12 TiB
    b.add(tr::op::free_, ++t, 0x300000000);
    for (std::uint64_t i = 0; i < 200'000; ++i) b.add(tr::op::malloc_, ++t, 0x400000000 + 32 * i, 24, 0x404000);
    for (std::uint64_t i = 0; i < 1000; ++i) b.add(tr::op::malloc_, ++t, 0x500000000 + 4096 * i, 1 + i, 0x405000);
    const auto s = summarise(b);
    REQUIRE(s.peak_live_bytes > (std::uint64_t(1) << 40));
    const std::string text = at::format_text(s, {}, 10);
    INFO(text);
    check_right_aligned(text, "#  ");        // the call sites by count
    check_right_aligned(text, "size (B)");   // the histogram
    check_right_aligned(text, "thread");
    check_right_aligned(text, "lifetime");
    // The values themselves are all there, in human units.
    CHECK(text.find("1.12 TiB") != std::string::npos);
    CHECK(text.find("3.00 GiB") != std::string::npos);
    CHECK(text.find("1234567890123.0") != std::string::npos);  // the mean size, exact
    CHECK(text.find("1073741825-2147483648") != std::string::npos);
}

TEST_CASE("an empty trace gives a report, not a crash", "[trace][summary]") {
    tr::builder b("/bin/empty", {"empty"});
    const auto s = summarise(b);
    CHECK(s.events == 0);
    CHECK(s.allocations == 0);
    CHECK(s.peak_live_bytes == 0);
    CHECK(s.histogram.empty());
    CHECK(s.sites.empty());
    CHECK(s.series.size() == 1);
    CHECK(s.median_lifetime_ns == 0);
    const std::string text = at::format_text(s, {}, 10);
    CHECK(text.find("no allocation events") != std::string::npos);
    CHECK(text.find("/bin/empty") != std::string::npos);
    CHECK(text.find("Top 0 call sites by count") != std::string::npos);
    const std::string page = at::html_report(s, {});
    CHECK(page.find("\"sites\":[]") != std::string::npos);
    CHECK(occurrences(page, "</script>") == 2);
}

TEST_CASE("HTML: strings from the trace cannot break out of the data script", "[trace][summary][html]") {
    tr::builder b("/tmp/<b>bold</b>&amp", {"prog", "</script><script>alert(2)</script>"});
    b.maps("7f0000000000-7f0000010000 r-xp 00000000 08:01 77 /nonexistent/</script><img src=x onerror=alert(3)>/lib.so\n");
    b.add(tr::op::malloc_, 1, 0x10, 8, 0x7f0000000123).add(tr::op::malloc_, 2, 0x20, 8, 0x99);
    const auto t = parse(b.finish());
    const auto s = at::summarise(t);
    auto syms = at::symbolize_sites(s, t.maps, true);
    REQUIRE(syms.size() == 2);
    // A site whose function name itself is hostile.
    for (auto& sym : syms)
        if (sym.address == 0x99) sym.frames.push_back({"</script><script>alert(1)</script>", "/src/a</script>.cpp", 7});
    at::html_options o;
    o.title = "summary of </script> & <friends>";
    const std::string page = at::html_report(s, syms, o);
    // Exactly the data script and the code script end; nothing else.
    CHECK(occurrences(page, "</script>") == 2);
    CHECK(occurrences(page, "<script") == 2);
    CHECK(page.find("alert(") != std::string::npos);              // the data is there...
    CHECK(page.find("<script>alert") == std::string::npos);       // ...but never as markup
    CHECK(page.find("<img") == std::string::npos);
    CHECK(page.find("\\u003c/script\\u003e\\u003cscript\\u003ealert(1)") != std::string::npos);
    CHECK(page.find("<title>summary of &lt;/script&gt; &amp; &lt;friends&gt;</title>") != std::string::npos);
    // The JSON itself: the module path survives, escaped.
    CHECK(page.find("\"module\":\"/nonexistent/\\u003c/script\\u003e\\u003cimg src=x onerror=alert(3)\\u003e/lib.so\"") !=
          std::string::npos);
    // Self-contained: no external resources.
    CHECK(page.find("src=\"http") == std::string::npos);
    CHECK(page.find("<link rel=\"stylesheet\"") == std::string::npos);
    // Stable ids the browser test relies on.
    for (const char* id : {"id=\"site-filter\"", "id=\"site-table\"", "id=\"live-chart\"", "id=\"size-min\"",
                           "id=\"size-max\"", "id=\"site-count\"", "id=\"report-data\""})
        CHECK(page.find(id) != std::string::npos);
}

TEST_CASE("HTML: JSON strings escape control characters, quotes and line separators", "[trace][summary][html]") {
    using at::html::json_string;
    CHECK(json_string("a\"b\\c") == "\"a\\\"b\\\\c\"");
    CHECK(json_string(std::string("x\ny\x01z", 5)) == "\"x\\ny\\u0001z\"");
    CHECK(json_string("</script>") == "\"\\u003c/script\\u003e\"");
    CHECK(json_string("a\xe2\x80\xa8" "b") == "\"a\\u2028b\"");
    CHECK(at::html::escape("<a href='x'>&</a>") == "&lt;a href=&#39;x&#39;&gt;&amp;&lt;/a&gt;");
}

TEST_CASE("HTML: large traces embed at most max_sites sites", "[trace][summary][html]") {
    tr::builder b;
    std::uint64_t t = 0;
    for (std::uint64_t k = 0; k < 300; ++k) b.add(tr::op::malloc_, ++t, 0x1000 * (k + 1), k == 299 ? 1 << 20 : 8, 0x10 + k);
    const auto s = summarise(b);
    at::html_options o;
    o.max_sites = 100;
    const auto idx = at::html::embedded_sites(s, o.max_sites);
    CHECK(idx.size() == 100);
    // The largest site by bytes is kept even though it is last by count.
    bool has_big = false;
    for (auto i : idx) has_big |= s.sites[i].site == 0x10 + 299;
    CHECK(has_big);
    const std::string page = at::html_report(s, {}, o);
    CHECK(page.find("\"sites_total\":300") != std::string::npos);
    CHECK(occurrences(page, "\"addr\":") == 100);
}

TEST_CASE("maps parsing and module-relative addresses", "[trace][summary][symbols]") {
    const std::string maps = "555555554000-555555556000 r--p 00000000 08:01 11 /opt/app\n"
                             "555555556000-55555555a000 r-xp 00002000 08:01 11 /opt/app\n"
                             "7f0000000000-7f0000001000 r--p 00000000 08:01 12 /opt/lib/libx.so (deleted)\n"
                             "7f0000001000-7f0000005000 r-xp 00001000 08:01 12 /opt/lib/libx.so (deleted)\n"
                             "7ffff7fc1000-7ffff7fc3000 r-xp 00000000 00:00 0                  [vdso]\n"
                             "7ffff8000000-7ffff8001000 rw-p 00000000 00:00 0 \n"
                             "garbage line\n";
    const auto m = at::parse_maps(maps);
    REQUIRE(m.size() == 6);
    CHECK(m[0].path == "/opt/app");
    CHECK(m[1].offset == 0x2000);
    CHECK(m[2].path == "/opt/lib/libx.so");
    CHECK(m[4].path == "[vdso]");
    CHECK(m[5].path.empty());

    const std::vector<std::uint64_t> sites = {0x555555556010, 0x7f0000001234, 0x7ffff7fc1100, 0x7ffff8000010, 0x1234, 0};
    at::symbolize_stats st;
    const auto syms = at::symbolize(maps, sites, {}, &st);
    REQUIRE(syms.size() == sites.size());
    CHECK(syms[0].module == "/opt/app");
    CHECK(syms[0].offset == 0x2010);  // base = lowest start - its offset
    CHECK(syms[0].location() == "app+0x2010");
    CHECK(syms[0].frames.empty());
    CHECK(syms[1].location() == "libx.so+0x1234");
    CHECK(syms[2].location() == "[vdso]+0x100");
    CHECK(syms[3].location() == "0x7ffff8000010");  // anonymous mapping
    CHECK(syms[4].location() == "0x1234");          // outside every mapping
    CHECK(syms[5].location() == "0x0");
    CHECK(syms[0].display() == "app+0x2010");
    CHECK(st.modules == 2);
    CHECK(st.failed.size() == 2);  // neither file exists here
    CHECK(st.resolved_sites == 0);
}

TEST_CASE("addr2line output: inline chains, discriminators, unknowns", "[trace][summary][symbols]") {
    const std::string out = "0x0000000000001139\n"
                            "inner(int)\n"
                            "/src/a.hpp:12 (discriminator 3)\n"
                            "outer()\n"
                            "/src/a.cpp:40\n"
                            "0x0000000000002000\n"
                            "??\n"
                            "??:0\n"
                            "0x0000000000003000\n"
                            "stripped_fn\n"
                            "??:?\n";
    const auto r = at::detail::parse_addr2line(out, {0x1139, 0x2000, 0x3000});
    REQUIRE(r.size() == 3);
    REQUIRE(r[0].size() == 2);
    CHECK(r[0][0].function == "inner(int)");
    CHECK(r[0][0].file == "/src/a.hpp");
    CHECK(r[0][0].line == 12);
    CHECK(r[0][1].function == "outer()");
    CHECK(r[0][1].line == 40);
    CHECK(r[1].empty());
    REQUIRE(r[2].size() == 1);
    CHECK(r[2][0].function == "stripped_fn");
    CHECK(r[2][0].file.empty());

    at::symbol s;
    s.module = "/lib/x.so";
    s.offset = 0x10;
    s.frames = r[0];
    CHECK(s.function() == "inner(int)");
    CHECK(s.location() == "/src/a.hpp:12");
    CHECK(s.inlined_into() == "outer() (/src/a.cpp:40)");
    s.frames = r[2];
    CHECK(s.display() == "stripped_fn (x.so+0x10)");
}

TEST_CASE("symbolising this test's own code through addr2line", "[trace][summary][symbols]") {
    std::ifstream f("/proc/self/maps");
    REQUIRE(f);
    const std::string maps((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    CHECK(summary_test_marker(1) >= 1);
    // A "return address" one byte into the function: site - 1 is its entry.
    const auto site = reinterpret_cast<std::uintptr_t>(&summary_test_marker) + 1;
    const int type = at::detail::elf_type("/proc/self/exe");
    CHECK((type == 2 || type == 3));

    // Without addr2line (or when it is missing): module+offset.
    at::symbolize_options none;
    none.addr2line = "/nonexistent/addr2line";
    at::symbolize_stats st;
    const auto fallback = at::symbolize(maps, {site}, none, &st);
    REQUIRE(fallback.size() == 1);
    CHECK(!fallback[0].module.empty());
    CHECK(fallback[0].frames.empty());
    CHECK(fallback[0].location().find("test_trace_summary+0x") == 0);
    CHECK(st.failed.size() == 1);

    if (::access("/usr/bin/addr2line", X_OK) != 0) {
        WARN("addr2line (binutils) is not installed: skipping the real lookup");
        return;
    }
    const auto syms = at::symbolize(maps, {site}, {}, &st);
    REQUIRE(syms.size() == 1);
    INFO(syms[0].display());
    CHECK(syms[0].function().find("summary_test_marker") != std::string::npos);
    CHECK(syms[0].location().find("test_trace_summary.cpp:") != std::string::npos);
    CHECK(st.resolved_sites == 1);
    CHECK(st.failed.empty());
}

#if defined(ALLOTHEQUE_SYMBOL_PROBE) && defined(ALLOTHEQUE_SYMBOL_PROBE_STRIPPED)
namespace {

// Runs a command and returns its standard output.
std::string command_output(const std::string& cmd) {
    std::FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) return {};
    std::string out;
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    ::pclose(p);
    return out;
}

struct nm_symbol {
    std::uint64_t address = 0, size = 0;
    bool found = false;
};
// `name`'s address and size in `file`, from binutils' nm (independent of the
// ELF reading under test).
nm_symbol nm_lookup(const std::string& file, const std::string& name) {
    const std::string out = command_output("nm -S --defined-only '" + file + "' 2>/dev/null");
    nm_symbol r;
    for (std::size_t p = 0, e; p < out.size(); p = e + 1) {
        e = std::min(out.find('\n', p), out.size());
        const std::string line = out.substr(p, e - p);
        unsigned long long a = 0, n = 0;
        char type = 0;
        char sym[256] = {};
        if (std::sscanf(line.c_str(), "%llx %llx %c %255s", &a, &n, &type, sym) == 4 && name == sym)
            return nm_symbol{a, n, true};
    }
    return r;
}

} // namespace
#endif

TEST_CASE("stripped code is not named after the exported symbol before it", "[trace][summary][symbols]") {
#if defined(ALLOTHEQUE_SYMBOL_PROBE) && defined(ALLOTHEQUE_SYMBOL_PROBE_STRIPPED)
    const std::string full = ALLOTHEQUE_SYMBOL_PROBE, stripped = ALLOTHEQUE_SYMBOL_PROBE_STRIPPED;
    if (::access("/usr/bin/addr2line", X_OK) != 0 || ::access("/usr/bin/nm", X_OK) != 0) {
        WARN("binutils (addr2line, nm) are not installed: skipping");
        return;
    }
    // The layout the test needs: the static function starts after the end
    // of the exported one, and the stripped copy has no symbol for it.
    const auto exported = nm_lookup(full, "atq_probe_exported");
    const auto hidden = nm_lookup(full, "atq_probe_hidden");
    REQUIRE(exported.found);
    REQUIRE(hidden.found);
    REQUIRE(hidden.address >= exported.address + exported.size);
    REQUIRE(hidden.size >= 16);
    REQUIRE_FALSE(nm_lookup(stripped, "atq_probe_hidden").found);
    const std::uint64_t inside_hidden = hidden.address + hidden.size / 2;
    const std::uint64_t inside_exported = exported.address + exported.size / 2;
    // What addr2line alone says about the stripped file (the bug being fixed).
    INFO("addr2line: " << command_output("addr2line -f -e '" + stripped + "' 0x" + [&] {
        char b[32];
        std::snprintf(b, sizeof b, "%llx", static_cast<unsigned long long>(inside_hidden));
        return std::string(b);
    }()));

    // The file mapped at 0x7f0000000000 in a traced process; the sites are
    // return addresses, one byte past the probed address.
    auto maps_for = [](const std::string& file) {
        struct stat sb {};
        REQUIRE(::stat(file.c_str(), &sb) == 0);
        return "7f0000000000-7f0000100000 r-xp 00000000 08:01 " + std::to_string(sb.st_ino) + " " + file + "\n";
    };
    const std::uint64_t base = 0x7f0000000000;
    const std::vector<std::uint64_t> sites = {base + inside_hidden + 1, base + inside_exported + 1};

    at::symbolize_stats st;
    const auto syms = at::symbolize(maps_for(stripped), sites, {}, &st);
    REQUIRE(syms.size() == 2);
    CHECK(syms[0].function().empty());
    char want[64];
    std::snprintf(want, sizeof want, "libatq_symbol_probe.stripped.so+0x%llx",
                  static_cast<unsigned long long>(inside_hidden + 1));
    CHECK(syms[0].display() == want);
    CHECK(syms[1].function() == "atq_probe_exported");  // inside a symbol: still named
    CHECK(st.outside_symbols == 1);

    // With its symbol table, the static function has a name and a size.
    const auto named = at::symbolize(maps_for(full), sites, {}, &st);
    CHECK(named[0].function() == "atq_probe_hidden");
    CHECK(named[1].function() == "atq_probe_exported");
    CHECK(st.outside_symbols == 0);

    // The extents the check uses are nm's sizes.
    const auto extents = at::detail::symbol_extents(full);
    CHECK(at::detail::inside_a_symbol(extents, hidden.address));
    CHECK(at::detail::inside_a_symbol(extents, hidden.address + hidden.size - 1));
    CHECK_FALSE(at::detail::inside_a_symbol(at::detail::symbol_extents(stripped), inside_hidden));
    CHECK(at::detail::symbol_extents("/nonexistent").empty());
#else
    WARN("built without the probe library (no strip tool): skipping");
#endif
}

TEST_CASE("the command: errors, truncation, options", "[trace][summary][cli]") {
    tr::builder b;
    for (std::uint64_t i = 0; i < 50; ++i) b.add(tr::op::malloc_, i + 1, 0x1000 * (i + 1), 8 * (i % 5 + 1), 0x10 + i % 3);
    const auto good_bytes = b.finish();
    temp_file good(good_bytes);

    auto r = run_cli({"--no-symbols", "--top", "2", good.path});
    CHECK(r.status == 0);
    CHECK(r.out.find("Top 2 call sites by count (of 3 sites)") != std::string::npos);
    CHECK(r.out.find("Peak") != std::string::npos);
    CHECK(r.out.find("Small objects") != std::string::npos);

    // Corrupt: one flipped byte in the last record's payload -> checksum mismatch.
    auto bad_bytes = good_bytes;
    bad_bytes[bad_bytes.size() - 5] ^= std::byte{0x40};
    temp_file bad(bad_bytes);
    r = run_cli({bad.path});
    CHECK(r.status == 1);
    CHECK(r.out.empty());
    CHECK(r.err.find("error") != std::string::npos);
    CHECK(r.err.find("checksum") != std::string::npos);
    CHECK(r.err.find(bad.path) != std::string::npos);

    // Not a trace at all.
    temp_file junk(std::vector<std::byte>(100, std::byte{'x'}));
    r = run_cli({junk.path});
    CHECK(r.status == 1);
    CHECK(r.err.find("not an allotheque trace") != std::string::npos);

    // Truncated (no END record): refused, then summarised with --allow-truncated.
    tr::builder c;
    c.add(tr::op::malloc_, 1, 0x10, 8, 0x1);
    temp_file cut(c.unfinished());
    r = run_cli({cut.path});
    CHECK(r.status == 1);
    CHECK(r.err.find("--allow-truncated") != std::string::npos);
    r = run_cli({"--allow-truncated", "--no-symbols", cut.path});
    CHECK(r.status == 0);
    CHECK(r.out.find("TRUNCATED") != std::string::npos);
    CHECK(r.err.find("warning") != std::string::npos);

    // Missing file, usage errors.
    r = run_cli({"/nonexistent/trace.atq"});
    CHECK(r.status == 1);
    CHECK(r.err.find("cannot open") != std::string::npos);
    CHECK(run_cli({}).status == 2);
    CHECK(run_cli({"--top"}).status == 2);
    CHECK(run_cli({"--top", "x", good.path}).status == 2);
    CHECK(run_cli({"--frobnicate", good.path}).status == 2);
    CHECK(run_cli({good.path, good.path}).status == 2);
    r = run_cli({"--help"});
    CHECK(r.status == 0);
    CHECK(r.out.find("usage: allotheque-trace summary") != std::string::npos);

    // --html writes the page.
    char name[] = "/tmp/test_trace_summary-html-XXXXXX";
    const int fd = ::mkstemp(name);
    REQUIRE(fd >= 0);
    ::close(fd);
    r = run_cli({"--no-symbols", "--html", name, good.path});
    CHECK(r.status == 0);
    std::ifstream page(name);
    const std::string html((std::istreambuf_iterator<char>(page)), std::istreambuf_iterator<char>());
    CHECK(html.find("<!DOCTYPE html>") == 0);
    CHECK(html.find("\"count\":") != std::string::npos);
    std::remove(name);
    r = run_cli({"--no-symbols", "--html", "/nonexistent/dir/report.html", good.path});
    CHECK(r.status == 1);
    CHECK(r.err.find("cannot write") != std::string::npos);
}
