// Layers: locked, per_thread, checked, stats — each alone, composed, and behind
// allotheque::allocator with standard containers. The failing cases of
// `checked` run in a child process (fork + waitpid) and check SIGABRT and the
// message on stderr. Multi-threaded stress lives in test_layers_threads.cpp.
#include "catch.hpp"
#include "in_child.hpp"

#include <allotheque/allocator.hpp>
#include <allotheque/allocators/kingsley.hpp>
#include <allotheque/allocators/quickfit.hpp>
#include <allotheque/allocators/velox.hpp>
#include <allotheque/layers/checked.hpp>
#include <allotheque/layers/heap_concept.hpp>
#include <allotheque/layers/locked.hpp>
#include <allotheque/layers/per_thread.hpp>
#include <allotheque/layers/stats.hpp>
#include <allotheque/sources/mmap_source.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <list>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace al = allotheque;
namespace ly = allotheque::layers;

namespace {

// Only what the concept requires: no deallocate_all, stats, last_allocation, owns.
struct minimal_heap {
    static constexpr std::size_t max_alignment = 16;
    static std::size_t good_size(std::size_t n, std::size_t a) noexcept {
        return a > max_alignment || (a & (a - 1)) != 0 ? 0 : (n + 15) / 16 * 16;
    }
    template <al::request_like R = al::request>
    void* allocate(const R& r) {
        void* p = try_allocate(r);
        if (!p) throw std::bad_alloc();
        return p;
    }
    template <al::request_like R = al::request>
    void* try_allocate(const R& r) noexcept {
        const std::size_t g = good_size(r.size == 0 ? 1 : r.size, r.alignment);
        if (g == 0) return nullptr;
        ++live;
        return std::aligned_alloc(16, g);
    }
    void deallocate(void* p, const al::request&) noexcept {
        --live;
        std::free(p);
    }
    int live = 0;
};
struct not_a_heap {
    void* allocate(std::size_t);
};

using velox = al::velox_heap<>;
using kingsley = al::kingsley_heap<>;

static_assert(ly::heap<velox> && ly::heap<kingsley> && ly::heap<minimal_heap>);
static_assert(!ly::heap<not_a_heap> && !ly::heap<int>);
static_assert(ly::heap<ly::locked<velox>> && ly::heap<ly::per_thread<velox>> && ly::heap<ly::checked<velox>> &&
              ly::heap<ly::stats<velox>>);
using deep = ly::checked<ly::stats<ly::locked<velox>>>;
static_assert(ly::heap<deep> && al::heap_like<deep>);
static_assert(ly::heap<ly::stats<ly::per_thread<ly::checked<kingsley>>>>);

// Optional capabilities appear exactly when the parent has them.
static_assert(ly::has_deallocate_all<ly::locked<velox>> && !ly::has_deallocate_all<ly::locked<minimal_heap>>);
static_assert(ly::has_stats<ly::locked<velox>> && !ly::has_stats<ly::locked<minimal_heap>>);
static_assert(ly::has_last_allocation<deep> && !ly::has_last_allocation<ly::checked<minimal_heap>>);
static_assert(ly::has_deallocate_all<ly::per_thread<velox>> && ly::has_trim<ly::per_thread<velox>>);
static_assert(ly::has_deallocate_run<ly::locked<velox>> && !ly::has_deallocate_run<ly::locked<minimal_heap>>);
static_assert(ly::has_owns<ly::locked<velox>> && !ly::has_owns<ly::locked<minimal_heap>>);
// Which heap holds a block (what per_thread needs) forwards through every layer.
static_assert(ly::has_owner<deep> && ly::has_owner<ly::stats<ly::checked<kingsley>>> && !ly::has_owner<minimal_heap>);
static_assert(ly::has_unsized_deallocate<ly::locked<velox>> && !ly::has_unsized_deallocate<ly::stats<velox>>);
static_assert(ly::has_stats<ly::stats<minimal_heap>>);   // the collector always reports its own counters
// Constants forward: a layered Velox still defaults to the near-previous hint.
static_assert(deep::locality_aware && !ly::locked<kingsley>::locality_aware);
static_assert(std::is_same_v<al::default_hint_policy<deep>::type, al::near_previous>);
static_assert(deep::max_alignment == velox::max_alignment);
// Nothing collected costs nothing.
static_assert(sizeof(ly::stats<velox, ly::stats_flags::none>) == sizeof(velox));
static_assert(sizeof(ly::stats<minimal_heap, ly::stats_flags::count_calls>) > sizeof(minimal_heap));

void fill(void* p, std::size_t n, unsigned char seed) {
    auto* b = static_cast<unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<unsigned char>(seed + i * 7);
}
bool intact(const void* p, std::size_t n, unsigned char seed) {
    auto* b = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i)
        if (b[i] != static_cast<unsigned char>(seed + i * 7)) return false;
    return true;
}

template <class Heap>
void exercise(Heap& h) {
    struct blk {
        void* p;
        std::size_t n, a;
    };
    std::vector<blk> v;
    const std::size_t aligns[] = {0, 0, 8, 16, 32, 64, 4096};
    for (std::size_t i = 0; i < 600; ++i) {
        const std::size_t n = (i * 37) % 700 + (i % 50 == 0 ? 70000 : 0);
        std::size_t a = aligns[i % std::size(aligns)];
        if (a > Heap::max_alignment) a = 0;
        void* p = h.allocate(al::request{n, nullptr, a});
        REQUIRE(p != nullptr);
        if (a) REQUIRE(reinterpret_cast<std::uintptr_t>(p) % a == 0);
        REQUIRE(reinterpret_cast<std::uintptr_t>(p) % 8 == 0);
        REQUIRE(h.good_size(n, a) >= n);
        fill(p, n, static_cast<unsigned char>(i));
        v.push_back({p, n, a});
        if (i % 3 == 0) {   // free an older one
            blk b = v[v.size() / 2];
            v.erase(v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2));
            h.deallocate(b.p, al::request{b.n, nullptr, b.a});
        }
    }
    for (std::size_t i = 0; i < v.size(); ++i) h.deallocate(v[i].p, al::request{v[i].n, nullptr, v[i].a});
    CHECK(h.try_allocate(al::request{1, nullptr, 3}) == nullptr);   // not a power of two
    CHECK(h.good_size(1, 3) == 0);
}

using allotheque_test::in_child;

std::string here_file() { return __FILE__; }

} // namespace

TEST_CASE("layers: every layer serves sizes and alignments like its parent", "[layers]") {
    SECTION("locked") {
        ly::locked<velox> h;
        exercise(h);
    }
    SECTION("stats") {
        ly::stats<kingsley> h;
        exercise(h);
    }
    SECTION("checked") {
        ly::checked<velox> h;
        exercise(h);
        CHECK(h.live_blocks() == 0);
    }
    SECTION("per_thread") {
        ly::per_thread<velox> h;
        exercise(h);
    }
    SECTION("composed") {
        ly::checked<ly::stats<ly::locked<velox>>> h;
        exercise(h);
        CHECK(h.parent().stats().live_bytes == 0);
        ly::per_thread<ly::checked<ly::stats<kingsley>>> p;
        exercise(p);
    }
    SECTION("over a heap with only the required members") {
        ly::stats<ly::checked<ly::locked<minimal_heap>>> h;
        exercise(h);
        CHECK(h.parent().parent().parent().live == 0);
    }
}

TEST_CASE("locked: forwards the optional members under the lock", "[layers]") {
    ly::locked<velox> h;
    void* p = h.allocate(al::request{40});
    CHECK(h.last_allocation() == p);
    CHECK(h.stats().os_bytes > 0);
    const std::size_t got = h.with_lock([&](velox& v) { return v.stats().os_bytes; });
    CHECK(got == h.stats().os_bytes);
    void* run[3] = {p, h.allocate(al::request{40}), nullptr};
    h.deallocate_run(run, 3, al::request{40});
    h.deallocate_all();
    CHECK(h.stats().os_bytes == 0);
    // Usable from several threads at once (the stress test is in test_layers_threads).
    std::vector<std::thread> ts;
    for (int t = 0; t < 2; ++t)
        ts.emplace_back([&h, t] {
            for (int i = 0; i < 2000; ++i) {
                void* q = h.allocate(al::request{static_cast<std::size_t>(8 + (i + t) % 200)});
                h.deallocate(q, al::request{static_cast<std::size_t>(8 + (i + t) % 200)});
            }
        });
    for (auto& t : ts) t.join();
}

TEST_CASE("stats: counts, live and peak bytes, OS bytes, histogram, JSON", "[layers]") {
    ly::stats<velox> h;
    CHECK(h.to_json().find("\"fragmentation\":null") != std::string::npos);
    void* a = h.allocate(al::request{24});
    void* b = h.allocate(al::request{100});
    void* c = h.allocate(al::request{1});
    auto s = h.stats();
    CHECK(s.allocations == 3);
    CHECK(s.deallocations == 0);
    CHECK(s.live_bytes == 125);
    CHECK(s.peak_live_bytes == 125);
    CHECK(s.os_bytes > 0);
    CHECK(s.peak_os_bytes >= s.os_bytes);
    CHECK(s.fragmentation == Approx((double(s.peak_os_bytes) - 125.0) / 125.0));
    CHECK(h.histogram_bucket(ly::stats<velox>::bucket_of(24)) == 1);
    CHECK(ly::stats<velox>::bucket_of(1) == 0);
    CHECK(ly::stats<velox>::bucket_of(2) == 1);
    CHECK(ly::stats<velox>::bucket_of(32) == 5);
    CHECK(ly::stats<velox>::bucket_of(33) == 6);
    CHECK(h.histogram_bucket(5) == 1);   // 24 in (16, 32]
    CHECK(h.histogram_bucket(7) == 1);   // 100 in (64, 128]
    CHECK(h.histogram_bucket(0) == 1);   // 1
    h.deallocate(b, al::request{100});
    s = h.stats();
    CHECK(s.live_bytes == 25);
    CHECK(s.peak_live_bytes == 125);
    CHECK(s.deallocations == 1);
    CHECK(h.try_allocate(al::request{1, nullptr, 3}) == nullptr);
    CHECK(h.stats().failed_allocations == 1);

    const std::string j = h.to_json();
    for (const char* field : {"\"allocations\":3", "\"deallocations\":1", "\"failed_allocations\":1",
                              "\"live_bytes\":25", "\"peak_live_bytes\":125", "\"os_bytes\":", "\"peak_os_bytes\":",
                              "\"fragmentation\":", "\"histogram\":[{\"upto\":1,\"count\":1},{\"upto\":32,\"count\":1},"
                                                    "{\"upto\":128,\"count\":1}]"})
        CHECK(j.find(field) != std::string::npos);
    CHECK(j.front() == '{');
    CHECK(j.back() == '}');
    h.deallocate(a, al::request{24});
    h.deallocate(c, al::request{1});
    CHECK(h.stats().live_bytes == 0);

    SECTION("flags choose what is collected") {
        ly::stats<velox, ly::stats_flags::count_calls> k;
        void* p = k.allocate(al::request{8});
        k.deallocate(p, al::request{8});
        CHECK(k.to_json() == "{\"allocations\":1,\"deallocations\":1,\"failed_allocations\":0}");
        CHECK(k.stats().live_bytes == 0);
        ly::stats<velox, ly::stats_flags::none> z;
        p = z.allocate(al::request{8});
        z.deallocate(p, al::request{8});
        CHECK(z.to_json() == "{}");
        ly::stats<velox, ly::stats_flags::peak_live_bytes> pk;   // implies live bytes
        p = pk.allocate(al::request{8});
        CHECK(pk.to_json() == "{\"live_bytes\":8,\"peak_live_bytes\":8}");
        pk.deallocate(p, al::request{8});
    }
    SECTION("no OS figures when the parent has no stats()") {
        ly::stats<minimal_heap> m;
        void* p = m.allocate(al::request{8});
        CHECK(m.to_json().find("os_bytes") == std::string::npos);
        CHECK(m.stats().os_bytes == 0);
        m.deallocate(p, al::request{8});
    }
    SECTION("deallocate_all") {
        void* p = h.allocate(al::request{64});
        (void)p;
        h.deallocate_all();
        CHECK(h.stats().live_bytes == 0);
        CHECK(h.stats().peak_live_bytes == 125);
    }
}

TEST_CASE("checked: correct use passes; registry and canaries", "[layers]") {
    ly::checked<kingsley> h;
    void* a = h.allocate(al::request{24});
    void* b = h.allocate(al::request{100, nullptr, 64});
    CHECK(h.owns(a));
    CHECK(h.owns(b));
    CHECK(h.live_blocks() == 2);
    CHECK(h.good_size(24, 0) == 24);
    CHECK(static_cast<unsigned char*>(a)[0] == ly::checked<kingsley>::fresh_byte);
    std::memset(a, 1, 24);   // up to the end exactly: fine
    CHECK(h.verify_all() == 2);
    h.deallocate(a, al::request{24});
    CHECK(!h.owns(a));
    h.deallocate(b, al::request{100, nullptr, 64});
    void* c = ALLOTHEQUE_CHECKED_ALLOCATE(h, al::request{24});
    ALLOTHEQUE_CHECKED_DEALLOCATE(h, c, al::request{24});
    CHECK(ALLOTHEQUE_CHECKED_VERIFY_ALL(h) == 0);
    // An address freed and handed out again is live again, not a double free.
    void* d = h.allocate(al::request{24});
    h.deallocate(d, al::request{24});
    void* e = h.allocate(al::request{24});
    h.deallocate(e, al::request{24});
    h.deallocate(nullptr, al::request{24});
    // A request for zeros gets zeros, not the fresh pattern (it used to).
    al::request z{64};
    z.zero = true;
    auto* f = static_cast<unsigned char*>(h.allocate(z));
    for (int i = 0; i < 64; ++i) CHECK(f[i] == 0);
    std::memset(f, 7, 64);
    h.deallocate(f, z);
    auto* g = static_cast<unsigned char*>(h.allocate(z));   // likely the same chunk, written over
    for (int i = 0; i < 64; ++i) CHECK(g[i] == 0);
    h.deallocate(g, z);
}

TEST_CASE("checked: misuse aborts with a message naming the call site", "[layers]") {
    const std::string file = here_file();

    SECTION("double free") {
        int line = 0;
        auto [aborted, err] = in_child([&] {
            ly::checked<velox> h;
            void* p = h.allocate(al::request{24});
            h.deallocate(p, al::request{24});
            line = __LINE__ + 1;
            h.deallocate(p, al::request{24});
        });
        line = __LINE__ - 2;
        CHECK(aborted);
        INFO(err);
        CHECK(err.find("allotheque::checked: double free of 0x") == 0);
        CHECK(err.find("(size 24) at " + file + ":" + std::to_string(line)) != std::string::npos);
    }
    SECTION("a pointer the heap never gave out") {
        auto [aborted, err] = in_child([] {
            ly::checked<velox> h;
            alignas(16) static char not_ours[64];
            h.deallocate(not_ours, al::request{24});
        });
        CHECK(aborted);
        INFO(err);
        CHECK(err.find("allotheque::checked: invalid free of 0x") == 0);
        CHECK(err.find("never gave out") != std::string::npos);
        CHECK(err.find(file + ":") != std::string::npos);
    }
    SECTION("size differs at deallocation") {
        auto [aborted, err] = in_child([] {
            ly::checked<velox> h;
            void* p = h.allocate(al::request{24});
            h.deallocate(p, al::request{32});
        });
        CHECK(aborted);
        INFO(err);
        CHECK(err.find("allotheque::checked: size mismatch freeing 0x") == 0);
        CHECK(err.find("allocated with size 24") != std::string::npos);
        CHECK(err.find("freed with size 32") != std::string::npos);
    }
    SECTION("alignment differs at deallocation") {
        auto [aborted, err] = in_child([] {
            ly::checked<velox> h;
            void* p = h.allocate(al::request{24, nullptr, 32});
            h.deallocate(p, al::request{24});
        });
        CHECK(aborted);
        CHECK(err.find("size mismatch") != std::string::npos);
    }
    SECTION("overrun detected at free") {
        auto [aborted, err] = in_child([] {
            ly::checked<velox> h;
            auto* p = static_cast<char*>(h.allocate(al::request{24}));
            p[24] = 'x';   // one past the end
            ALLOTHEQUE_CHECKED_DEALLOCATE(h, p, al::request{24});
        });
        CHECK(aborted);
        INFO(err);
        CHECK(err.find("allotheque::checked: overrun past the end of 0x") == 0);
        CHECK(err.find("(size 24, allocated at " + file) != std::string::npos);
        CHECK(err.find("detected at free at " + file) != std::string::npos);
    }
    SECTION("overrun detected by verify_all") {
        auto [aborted, err] = in_child([] {
            ly::checked<kingsley> h;
            void* ok = h.allocate(al::request{100});
            auto* p = static_cast<char*>(h.allocate(al::request{7}));
            p[7 + 15] = 'x';   // last canary byte
            (void)ok;
            h.verify_all();
        });
        CHECK(aborted);
        INFO(err);
        CHECK(err.find("allotheque::checked: overrun past the end of 0x") == 0);
        CHECK(err.find("byte 15 past the end") != std::string::npos);
        CHECK(err.find("detected by verify_all at " + file) != std::string::npos);
    }
    SECTION("correct use does not abort in the child either") {
        auto [aborted, err] = in_child([] {
            ly::checked<velox> h;
            void* p = h.allocate(al::request{24});
            h.deallocate(p, al::request{24});
        });
        CHECK(!aborted);
        CHECK(err.empty());
    }
}

// Named, external functions: with ENABLE_EXPORTS (tests/CMakeLists.txt)
// glibc's backtrace_symbols_fd can name them, and ASan's symbolizer always can.
namespace checked_callers {
[[gnu::noinline]] void free_twice_through_allocator() {
    ly::checked<velox> h;
    al::allocator<int, ly::checked<velox>> a(h);
    int* p = a.allocate(4);
    a.deallocate(p, 4);
    a.deallocate(p, 4);
}
[[gnu::noinline]] void leak_one(bool report) {
    ly::checked<velox> h;
    h.report_leaks(report);
    void* p = h.allocate(al::request{24});
    (void)p;
}
} // namespace checked_callers

TEST_CASE("checked: through an adapter the report shows the caller's stack; leaks are reported", "[layers]") {
    SECTION("double free through al::allocator") {
        auto [aborted, err] = in_child([] { checked_callers::free_twice_through_allocator(); });
        CHECK(aborted);
        INFO(err);
        CHECK(err.find("allotheque::checked: double free of 0x") == 0);
        CHECK(err.find("this call:") != std::string::npos);
        CHECK(err.find("the block was allocated from:") != std::string::npos);
        // The adapter's own line is in the message; the caller is in the stacks.
        CHECK(err.find("free_twice_through_allocator") != std::string::npos);
    }
    SECTION("a heap destroyed with a block live reports it") {
        auto [aborted, err] = in_child([] { checked_callers::leak_one(true); });
        CHECK(!aborted);
        INFO(err);
        CHECK(err.find("allotheque::checked: 1 blocks (24 bytes) still live when the heap is destroyed") == 0);
        CHECK(err.find("leak: 0x") != std::string::npos);
        CHECK(err.find("leak_one") != std::string::npos);
    }
    SECTION("the leak report can be turned off") {
        auto [aborted, err] = in_child([] { checked_callers::leak_one(false); });
        CHECK(!aborted);
        CHECK(err.empty());
    }
}

TEST_CASE("per_thread: a heap per thread, remote frees, heaps outlive threads", "[layers]") {
    ly::per_thread<velox> h;
    void* p = h.allocate(al::request{48});
    fill(p, 48, 3);
    CHECK(h.heap_count() == 1);
    CHECK(h.last_allocation() != nullptr);
    CHECK(h.stats().os_bytes > 0);

    SECTION("a block freed on another thread goes to its owner's remote list") {
        std::thread([&] {
            REQUIRE(intact(p, 48, 3));
            h.deallocate(p, al::request{48});   // this thread has no heap: remote free
        }).join();
        CHECK(h.remote_frees() == 1);
        CHECK(h.heap_count() == 1);
        SECTION("collect() takes it back now") {
            h.collect();
            void* q = h.allocate(al::request{48});
            CHECK(q == p);
            h.deallocate(q, al::request{48});
        }
        SECTION("the first allocation its heap's chunks cannot serve takes it back, before any refill") {
            const std::size_t os = h.stats().os_bytes;
            std::vector<void*> got;
            for (int i = 0; i < 100000 && (got.empty() || got.back() != p); ++i) got.push_back(h.allocate(al::request{48}));
            CHECK(got.back() == p);
            CHECK(h.stats().os_bytes == os);
            for (void* q : got) h.deallocate(q, al::request{48});
        }
    }
    SECTION("blocks outlive the thread that allocated them") {
        std::vector<void*> from_thread;
        std::thread([&] {
            for (int i = 0; i < 100; ++i) {
                void* q = h.allocate(al::request{static_cast<std::size_t>(16 + i), nullptr, i % 2 ? 64u : 0u});
                fill(q, static_cast<std::size_t>(16 + i), static_cast<unsigned char>(i));
                from_thread.push_back(q);
            }
        }).join();
        CHECK(h.heap_count() == 2);
        for (int i = 0; i < 100; ++i) {
            REQUIRE(intact(from_thread[static_cast<std::size_t>(i)], static_cast<std::size_t>(16 + i),
                           static_cast<unsigned char>(i)));
            h.deallocate(from_thread[static_cast<std::size_t>(i)],
                         al::request{static_cast<std::size_t>(16 + i), nullptr, i % 2 ? 64u : 0u});
        }
        // This thread holds a heap: its frees wait in its outbox, in batches,
        // until it flushes (a full batch, its slow path, collect()).
        CHECK(h.remote_frees() == al::detail::remote_batch::capacity);
        h.collect();
        CHECK(h.remote_frees() == 100);
        // Later threads adopt the orphaned heap (and drain it) instead of adding one each.
        for (int t = 0; t < 4; ++t)
            std::thread([&] {
                void* q = h.allocate(al::request{40});
                h.deallocate(q, al::request{40});
                h.collect();
            }).join();
        CHECK(h.heap_count() == 2);
        h.deallocate(p, al::request{48});
    }
    SECTION("deallocate_all and per-heap inspection when quiescent") {
        std::size_t heaps = 0;
        h.for_each_heap([&](velox& v) {
            ++heaps;
            CHECK(v.stats().os_bytes > 0);
        });
        CHECK(heaps == 1);
        h.deallocate_all();
        CHECK(h.stats().os_bytes == 0);
    }
}

TEST_CASE("per_thread: objects are independent, ids never reused", "[layers]") {
    for (int round = 0; round < 3; ++round) {
        ly::per_thread<kingsley> a, b;
        void* p = a.allocate(al::request{16});
        void* q = b.allocate(al::request{16});
        CHECK(a.heap_count() == 1);
        CHECK(b.heap_count() == 1);
        // Freed through the wrong object still reaches the right heap (the header names it).
        b.deallocate(p, al::request{16});
        a.deallocate(q, al::request{16});
        a.collect();
        b.collect();
    }
}

TEST_CASE("layers behind allotheque::allocator with standard containers", "[layers]") {
    SECTION("checked<stats<locked<velox>>>") {
        deep h;
        {
            using A = al::allocator<int, deep>;
            std::vector<int, A> v{A(h)};
            for (int i = 0; i < 1000; ++i) v.push_back(i);
            std::map<int, std::string, std::less<>, al::allocator<std::pair<const int, std::string>, deep>> m{
                al::allocator<std::pair<const int, std::string>, deep>(h)};
            for (int i = 0; i < 300; ++i) m.emplace(i, std::to_string(i));
            std::list<double, al::allocator<double, deep>> l{al::allocator<double, deep>(h)};
            for (int i = 0; i < 300; ++i) l.push_back(i);
            CHECK(h.live_blocks() > 600);
            CHECK(h.verify_all() == h.live_blocks());
            CHECK(m.at(123) == "123");
            CHECK(v[999] == 999);
        }
        CHECK(h.live_blocks() == 0);
        auto s = h.stats();
        CHECK(s.live_bytes == 0);
        CHECK(s.allocations == s.deallocations);
        CHECK(s.peak_live_bytes > 0);
    }
    SECTION("per_thread<stats<kingsley>> from several threads") {
        using H = ly::per_thread<ly::stats<kingsley>>;
        H h;
        std::vector<std::thread> ts;
        std::atomic<int> empty{0};   // Catch's CHECK is not for other threads
        for (int t = 0; t < 3; ++t)
            ts.emplace_back([&h, &empty] {
                std::map<int, int, std::less<>, al::allocator<std::pair<const int, int>, H>> m{
                    al::allocator<std::pair<const int, int>, H>(h)};
                for (int i = 0; i < 2000; ++i) m[i] = i;
                if (h.stats().live_bytes == 0) ++empty;   // this thread's heap's figures
            });
        for (auto& t : ts) t.join();
        CHECK(empty == 0);
        h.for_each_heap([](ly::stats<kingsley>& s) { CHECK(s.stats().live_bytes == 0); });
    }
    SECTION("stats<per_thread<velox>> keeps the near-previous hint") {
        using H = ly::stats<ly::per_thread<velox>>;
        static_assert(std::is_same_v<al::default_hint_policy<H>::type, al::near_previous>);
        H h;
        std::list<int, al::allocator<int, H>> l{al::allocator<int, H>(h)};
        for (int i = 0; i < 500; ++i) l.push_back(i);
        CHECK(h.stats().allocations == 500);
    }
}
