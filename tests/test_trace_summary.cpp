// allotheque-trace summary (tools/trace/summary.hpp, symbolize.hpp,
// html_report.hpp) on synthetic traces with known answers.
#include "catch.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
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
