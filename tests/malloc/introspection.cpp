// The malloc's statistics and options (issue 33 item 3), run under LD_PRELOAD
// of each malloc library by run_introspection.sh, one case per process:
//
//   stats_match_proc   allotheque_malloc_stats() against /proc/self/status:
//                      after 4 threads fill ~160 MiB (every page written),
//                      resident_bytes is within 10 % + 8 MiB of the growth of
//                      VmRSS, os_bytes >= resident_bytes >= active_bytes
//                      less the large-block tails; after everything is freed
//                      and malloc_trim(0), both fall back together
//   heap_rows          one row per thread heap while 4 threads live; the
//                      rows add up to the process figures; max = 0 counts
//   glibc_api          mallinfo2(), mallinfo(), malloc_info() and
//                      malloc_stats() give the same figures; malloc_info with
//                      options != 0 fails with EINVAL
//   retain_env         (run with ALLOTHEQUE_RETAIN_BYTES=0 and
//                      ALLOTHEQUE_PURGE_DELAY_MS=0) 64 freed 1 MiB blocks:
//                      at most the back end's floor, peak / 8, stays resident
//   idle               allocates a little and exits (the script checks what
//                      the options print)
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <allotheque/malloc_stats.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

[[noreturn]] void die(const char* what) {
    fprintf(stderr, "introspection: FAIL: %s\n", what);
    exit(1);
}
void check(bool ok, const char* what) {
    if (!ok) die(what);
}

// VmRSS in bytes, read with no allocation in the measured path that matters
// (a fixed buffer).
std::size_t vm_rss() {
    FILE* f = fopen("/proc/self/status", "r");
    if (!f) die("cannot open /proc/self/status");
    char line[256];
    std::size_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0) kb = strtoull(line + 6, nullptr, 10);
    fclose(f);
    return kb * 1024;
}

allotheque_stats stats() {
    allotheque_stats s;
    check(allotheque_malloc_stats(&s) == 0, "allotheque_malloc_stats failed");
    return s;
}

void print(const char* when, const allotheque_stats& s, std::size_t rss_growth) {
    printf("%s: heaps %zu active %zu os %zu resident %zu free %zu large %zu (%zu); VmRSS growth %zu\n", when,
           s.heaps, s.active_bytes, s.os_bytes, s.resident_bytes, s.free_bytes, s.large_blocks, s.large_bytes,
           rss_growth);
}

std::size_t diff(std::size_t a, std::size_t b) { return a > b ? a - b : b - a; }

int stats_match_proc() {
    free(malloc(64));   // this thread's heap exists before the baseline
    const std::size_t rss0 = vm_rss();
    const allotheque_stats s0 = stats();
    constexpr int threads = 4;
    std::vector<std::vector<void*>> held(threads);
    std::vector<std::thread> ts;
    std::atomic<int> filled{0}, release{0};
    for (int t = 0; t < threads; ++t)
        ts.emplace_back([&, t] {
            std::mt19937_64 rng(static_cast<std::uint64_t>(t) + 1);
            std::size_t bytes = 0;
            while (bytes < (40u << 20)) {
                // Mostly small blocks, some large ones.
                const std::size_t n = rng() % 16 == 0 ? 70000 + rng() % 300000 : 16 + rng() % 2000;
                void* p = malloc(n);
                if (!p) die("malloc failed");
                memset(p, 0x5a, n);
                held[static_cast<std::size_t>(t)].push_back(p);
                bytes += n;
            }
            filled.fetch_add(1);
            while (release.load() == 0) usleep(1000);
        });
    while (filled.load() < threads) usleep(1000);
    // Measured while the threads (and their heaps) are alive.
    const std::size_t rss1 = vm_rss();
    const allotheque_stats s1 = stats();
    const std::size_t growth = rss1 > rss0 ? rss1 - rss0 : 0;
    const std::size_t counted = s1.resident_bytes - s0.resident_bytes;
    print("filled", s1, growth);
    check(s1.heaps >= threads + 1, "a heap per live thread");
    check(s1.os_bytes >= s1.resident_bytes, "os_bytes >= resident_bytes");
    check(s1.active_bytes >= 4 * (40u << 20) / 2, "active_bytes counts what the threads hold");
    // The slack: thread stacks and the program's own vectors are in VmRSS
    // and not in the heaps; reserved pages never written are in the heaps'
    // figure and not in VmRSS.
    if (diff(counted, growth) > growth / 10 + (8u << 20)) die("resident_bytes does not follow VmRSS");
    release.store(1);
    for (auto& t : ts) t.join();
    for (auto& v : held)
        for (void* p : v) free(p);
    malloc_trim(0);
    const std::size_t rss2 = vm_rss();
    const allotheque_stats s2 = stats();
    print("freed+trimmed", s2, rss2 > rss0 ? rss2 - rss0 : 0);
    check(s2.active_bytes < s1.active_bytes / 20, "active_bytes falls when everything is freed");
    check(s2.resident_bytes < s1.resident_bytes / 4, "resident_bytes falls after malloc_trim");
    check(rss2 < rss1 - (rss1 - rss0) / 2, "VmRSS falls with it");
    return 0;
}

int heap_rows() {
    constexpr int threads = 4;
    std::atomic<int> ready{0}, done{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
        ts.emplace_back([&] {
            void* p = malloc(1000);
            memset(p, 1, 1000);
            ready.fetch_add(1);
            while (done.load() == 0) usleep(1000);
            free(p);
        });
    while (ready.load() < threads) usleep(1000);
    free(malloc(16));
    const std::size_t n = allotheque_malloc_heap_stats(nullptr, 0);
    check(n >= threads + 1, "a row per live thread's heap");
    std::vector<allotheque_stats> rows(n + 8);
    const std::size_t m = allotheque_malloc_heap_stats(rows.data(), rows.size());
    check(m == n, "the count does not depend on max");
    const allotheque_stats total = stats();
    std::size_t os = 0, heaps = 0;
    for (std::size_t i = 0; i < m; ++i) {
        check(rows[i].heaps == 1, "a row is one heap");
        os += rows[i].os_bytes;
        heaps += rows[i].heaps;
    }
    check(heaps == total.heaps && os == total.os_bytes, "the rows add up to the process figures");
    check(allotheque_malloc_stats(nullptr) == -1, "a NULL out is refused");
    done.store(1);
    for (auto& t : ts) t.join();
    return 0;
}

int glibc_api() {
    std::vector<void*> v;
    for (int i = 0; i < 10000; ++i) v.push_back(malloc(static_cast<std::size_t>(16 + i % 500)));
    void* big = malloc(1 << 20);
    const allotheque_stats s = stats();
    const struct mallinfo2 m = mallinfo2();
    check(m.hblks == s.large_blocks && m.hblkhd == s.large_bytes, "mallinfo2: large blocks");
    check(m.arena + m.hblkhd == s.os_bytes, "mallinfo2: arena + hblkhd = os_bytes");
    check(m.uordblks + m.hblkhd == s.active_bytes, "mallinfo2: uordblks + hblkhd = active_bytes");
    // glibc deprecates mallinfo (int fields); programs still call it.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    const struct mallinfo old = mallinfo();
#pragma GCC diagnostic pop
    check(static_cast<std::size_t>(old.hblks) == s.large_blocks, "mallinfo: large blocks");
    char* buf = nullptr;
    std::size_t len = 0;
    FILE* f = open_memstream(&buf, &len);
    check(f && malloc_info(0, f) == 0, "malloc_info(0, f) succeeds");
    fclose(f);
    const std::string xml(buf, len);
    free(buf);
    check(xml.rfind("<malloc version=\"allotheque-1\"", 0) == 0, "malloc_info: the XML header");
    check(xml.find("</malloc>") != std::string::npos, "malloc_info: the XML closes");
    check(xml.find(std::string("heap=\"") + allotheque_malloc_heap_name() + "\"") != std::string::npos,
          "malloc_info names the heap");
    errno = 0;
    check(malloc_info(1, stdout) == -1 && errno == EINVAL, "malloc_info with options != 0: EINVAL");
    malloc_stats();   // on stderr; the script checks its total line
    free(big);
    for (void* p : v) free(p);
    return 0;
}

int retain_env() {
    free(malloc(64));
    std::vector<void*> v;
    for (int i = 0; i < 64; ++i) {
        void* p = malloc(1 << 20);
        if (!p) die("malloc failed");
        memset(p, 1, 1 << 20);
        v.push_back(p);
    }
    const allotheque_stats s1 = stats();
    for (void* p : v) free(p);
    const allotheque_stats s2 = stats();
    print("after free", s2, 0);
    // Nothing waits for the purge delay, and the budget is its floor: peak / 8.
    // (Not all of the metadata need be resident: no wrap-around below zero.)
    const std::size_t used = s2.active_bytes + s2.metadata_bytes;
    const std::size_t kept = s2.resident_bytes > used ? s2.resident_bytes - used : 0;
    if (kept > s1.peak_os_bytes / 8 + (2u << 20)) die("more than peak / 8 stays resident with RETAIN_BYTES=0");
    return 0;
}

int idle() {
    void* p = malloc(100);
    memset(p, 0, 100);
    free(p);
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 2) return 64;
    if (!allotheque_malloc_stats || !allotheque_malloc_heap_stats || !allotheque_malloc_heap_name) {
        fprintf(stderr, "introspection: not running under an allotheque malloc\n");
        return 1;
    }
    const std::string c = argv[1];
    if (c == "stats_match_proc") return stats_match_proc();
    if (c == "heap_rows") return heap_rows();
    if (c == "glibc_api") return glibc_api();
    if (c == "retain_env") return retain_env();
    if (c == "idle") return idle();
    fprintf(stderr, "introspection: unknown case %s\n", c.c_str());
    return 64;
}
