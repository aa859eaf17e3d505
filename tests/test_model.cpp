// Model-based test: for every heap, at least 1,000,000 random allocate /
// deallocate operations checked against a model of the live blocks.
//   - sizes 1..512 mostly, a tail up to 100 KiB (so large blocks too), some 0;
//   - hints: a live block's address, nullptr, a freed address, or a random one;
//   - alignments 0, 8, 16, 64;
//   - every block is filled (all good_size bytes) with a pattern derived from
//     its id, verified when freed, on random samples and at the end;
//   - no two live blocks overlap (std::map by address, neighbours checked);
//   - every block is aligned as documented (requested alignment, else the
//     natural alignment of good_size, at least 8);
//   - at the end, after the heap is gone, the source got back every byte.
// ALLOTHEQUE_MODEL_OPS overrides the number of operations per heap.
#include "catch.hpp"
#include "model_support.hpp"
#include "tracking_source.hpp"

#include <allotheque/allocators/defero.hpp>
#include <allotheque/allocators/kingsley.hpp>
#include <allotheque/allocators/medius.hpp>
#include <allotheque/allocators/quickfit.hpp>
#include <allotheque/allocators/velox.hpp>
#include <allotheque/heap.hpp>
#include <allotheque/malloc/shipped.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace al = allotheque;
using allotheque_test::source_ledger;

using allotheque_test::tracking_source;

namespace {

using allotheque_test::model_ops;

struct live_block {
    std::byte* p;
    std::size_t n, align, good;
    std::uint64_t id;
};

// good is a multiple of 8 and p is 8-aligned (checked before filling).
void fill(const live_block& b) { allotheque_test::fill_pattern(b.p, b.good, b.id); }
bool intact(const live_block& b) { return allotheque_test::pattern_intact(b.p, b.good, b.id); }

// Unsized: half the frees give no size (heap::deallocate(p): the span from
// the page map, as the malloc frees).
template <class H, bool Unsized = false>
class model {
public:
    model(H& h, std::uint64_t seed) : h_(h), rng_(seed) {}

    void allocate_one() {
        const std::size_t n = pick_size();
        const std::size_t a = pick_alignment();
        const void* hint = pick_hint();
        const std::size_t good = H::good_size(n, a);
        MODEL_REQUIRE(good >= n && good % 8 == 0, "n " << n << " a " << a << " good " << good);
        auto* p = static_cast<std::byte*>(h_.allocate(al::request{n, hint, a}));
        MODEL_REQUIRE(p != nullptr, "n " << n);
        const auto x = reinterpret_cast<std::uintptr_t>(p);
        // Alignment as documented.
        MODEL_REQUIRE(x % 8 == 0, x);
        if (a != 0) MODEL_REQUIRE(x % a == 0, "block " << x << " alignment " << a);
        else MODEL_REQUIRE(x % al::detail::natural_alignment(good) == 0, "block " << x << " good_size " << good);
        // No overlap with the neighbours.
        auto next = by_addr_.lower_bound(x);
        if (next != by_addr_.end())
            MODEL_REQUIRE(next->first >= x + good, "new block [" << x << ", +" << good
                                                                  << ") overlaps the next live block at "
                                                                  << next->first);
        if (next != by_addr_.begin()) {
            const live_block& prev = blocks_[std::prev(next)->second];
            MODEL_REQUIRE(std::prev(next)->first + prev.good <= x,
                          "new block at " << x << " overlaps the previous live block [" << std::prev(next)->first
                                          << ", +" << prev.good << ")");
        }
        live_block b{p, n, a, good, next_id_++};
        fill(b);
        by_addr_.emplace(x, blocks_.size());
        blocks_.push_back(b);
        ++allocations_;
        if (H::is_large(good)) ++large_;
    }

    void free_one() {
        const std::size_t i = rng_() % blocks_.size();
        free_at(i);
    }

    void free_at(std::size_t i) {
        const live_block b = blocks_[i];
        MODEL_REQUIRE(intact(b), "block id " << b.id << " size " << b.n << " align " << b.align << " corrupted");
        by_addr_.erase(reinterpret_cast<std::uintptr_t>(b.p));
        if (i + 1 != blocks_.size()) {
            blocks_[i] = blocks_.back();
            by_addr_[reinterpret_cast<std::uintptr_t>(blocks_[i].p)] = i;
        }
        blocks_.pop_back();
        recently_freed_ = b.p;
        if (Unsized && rng_() % 2 == 0) h_.deallocate(b.p);
        else h_.deallocate(b.p, al::request{b.n, nullptr, b.align});
        ++deallocations_;
    }

    void verify_sample(std::size_t count) {
        for (std::size_t k = 0; k < count && !blocks_.empty(); ++k) {
            const live_block& b = blocks_[rng_() % blocks_.size()];
            MODEL_REQUIRE(intact(b), "live block id " << b.id << " corrupted");
        }
    }

    void verify_all() {
        std::uintptr_t end = 0;
        for (auto [x, i] : by_addr_) {
            const live_block& b = blocks_[i];
            MODEL_REQUIRE(x >= end, "overlap at " << x);
            end = x + b.good;
            MODEL_REQUIRE(intact(b), "live block id " << b.id << " corrupted");
        }
        REQUIRE(by_addr_.size() == blocks_.size());
    }

    void free_all() {
        while (!blocks_.empty()) free_at(blocks_.size() - 1);
    }

    void run(std::size_t ops) {
        for (std::size_t op = 0; op < ops; ++op) {
            // Phases of growth and shrinkage so classes fill up and drain.
            // (Up to a few thousand live blocks: enough to fill many classes,
            // few enough for the linear class walks to stay fast under ASan.)
            const unsigned phase = static_cast<unsigned>(op / 10'000) % 4;
            const unsigned alloc_percent = phase == 0 ? 60 : phase == 2 ? 40 : 50;
            if (blocks_.empty() || rng_() % 100 < alloc_percent) allocate_one();
            else free_one();
            if (op % 5'000 == 0) verify_sample(50);
            if (op == ops / 2) {   // empty the heap once: every class drains completely
                verify_all();
                free_all();
            }
            max_live_ = std::max(max_live_, blocks_.size());
        }
        verify_all();
    }

    std::size_t live() const { return blocks_.size(); }
    std::size_t max_live() const { return max_live_; }
    std::size_t allocations() const { return allocations_; }
    std::size_t deallocations() const { return deallocations_; }
    std::size_t large() const { return large_; }

private:
    // 1..512 uniformly; the tail (3 %) up to 100 KiB comes mostly from a menu of
    // 32 sizes, as programs have few distinct large sizes. Exact-size heaps
    // (Velox, Medius, Defero) never split or merge, so every distinct size
    // leaves chunks of its own behind; with uniformly random tail sizes the
    // number of classes grows with history and so does every fallback walk
    // (see the report), which makes 1M operations far too slow under ASan.
    std::size_t pick_size() {
        const unsigned r = static_cast<unsigned>(rng_() % 1000);
        if (r < 2) return 0;
        if (r < 970) return 1 + rng_() % 512;
        if (r < 999) return tail_[rng_() % std::size(tail_)];
        return 513 + rng_() % (100 * 1024 - 512);   // any size up to 100 KiB, rarely
    }
    std::size_t pick_alignment() {
        static constexpr std::size_t as[] = {0, 0, 0, 0, 8, 16, 64};
        return as[rng_() % std::size(as)];
    }
    const void* pick_hint() {
        const unsigned r = static_cast<unsigned>(rng_() % 100);
        if (r < 50 && !blocks_.empty()) return blocks_[rng_() % blocks_.size()].p + rng_() % 8;
        if (r < 53) return recently_freed_;
        if (r < 55) return reinterpret_cast<const void*>(rng_() & ((std::uint64_t{1} << 47) - 1));
        return nullptr;
    }

    H& h_;
    std::mt19937_64 rng_;
    std::size_t tail_[32] = {520,   600,   777,   1000,  1024,  1500,  2048,  3000,  4000,  4096,  5000,
                             6000,  8000,  8192,  10000, 12345, 16384, 20000, 24000, 32768, 40000, 50000,
                             60000, 65536, 65537, 70000, 80000, 90000, 99999, 100000, 102400, 1 << 16};
    std::vector<live_block> blocks_;
    std::map<std::uintptr_t, std::size_t> by_addr_;
    const void* recently_freed_ = nullptr;
    std::uint64_t next_id_ = 1;
    std::size_t max_live_ = 0, allocations_ = 0, deallocations_ = 0, large_ = 0;
};

template <class H, bool Unsized = false>
void run_model(const char* name, std::uint64_t seed, std::size_t divisor = 1) {
    const std::size_t ops = model_ops() / divisor;
    source_ledger ledger;
    const auto t0 = std::chrono::steady_clock::now();
    {
        auto h = std::make_unique<H>(tracking_source(ledger));
        model<H, Unsized> m(*h, seed);
        m.run(ops);
        CHECK(m.allocations() + m.deallocations() >= ops);
        CHECK(h->stats().os_bytes == ledger.bytes);
        if (ops >= 100'000) {
            CHECK(m.large() > 0u);   // the tail really reached the large path
            CHECK(m.max_live() > 1000u);
        }
        // Free half, leave the rest to the destructor.
        for (std::size_t k = m.live() / 2; k > 0; --k) m.free_one();
        m.verify_all();
        INFO(name << ": " << m.allocations() << " allocations, max live " << m.max_live() << ", peak from source "
                  << ledger.peak << " bytes");
        CHECK(ledger.bad_deallocations == 0u);
    }
    CHECK(ledger.bytes == 0u);
    CHECK(ledger.allocations == ledger.deallocations);
    CHECK(ledger.balanced());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    WARN(name << ": " << ops << " operations in " << s << " s, peak " << ledger.peak / 1024 << " KiB from the source");
}

} // namespace

TEST_CASE("model: kingsley_heap", "[model]") { run_model<al::kingsley_heap<tracking_source>>("kingsley", 101); }
TEST_CASE("model: quickfit_heap", "[model]") { run_model<al::quickfit_heap<tracking_source>>("quickfit", 102); }
TEST_CASE("model: velox_heap", "[model]") { run_model<al::velox_heap<tracking_source>>("velox", 103); }
TEST_CASE("model: Velox over size classes", "[model]") {
    run_model<al::heap<al::velox_classed_partition<>, tracking_source, al::velox_heap_options>>("velox classed", 109);
}
// The Velox library's heap (its partition and options; the model's source):
// frees without a size pass the stack their span keeps (heap.hpp,
// partition_span_chunks), and the eager policy's sweeps empty classes whose
// spans still hold live chunks, so that later frees find them released.
constexpr al::heap_config velox_library_eager = [] {
    al::heap_config c = al::malloc_declarations::unhinted_malloc_config;
    c.reclaim = al::reclaim_policy::eager;
    return c;
}();
TEST_CASE("model: the Velox library's heap, frees without a size, eager sweeps", "[model]") {
    using P = al::malloc_declarations::velox::partition;
    using H = al::heap<P, tracking_source, al::configured<velox_library_eager>>;
    static_assert(P::keeps_span_chunks);
    run_model<H, true>("velox library", 111, 2);
}
// A span across two vicinities keeps no stack, so every free from it takes
// the front's miss: the heap cuts a span of sub-page chunks short at its
// vicinity's end (heap.hpp, refill; hash_table::span_room). Large blocks
// between the spans move them off any 16 KiB alignment, so without the cut
// about a fifth of them straddle a vicinity's end.
TEST_CASE("the Velox library's spans each lie in one vicinity", "[model]") {
    using P = al::malloc_declarations::velox::partition;
    using H = al::heap<P, tracking_source, al::configured<al::malloc_declarations::unhinted_malloc_config>>;
    constexpr std::size_t vicinity = std::size_t{1} << 16;
    auto h = std::make_unique<H>();
    std::mt19937_64 rng(2026);
    struct block {
        std::byte* p;
        std::size_t n;
        unsigned char fill;
    };
    const auto intact = [](const block& b) {
        return std::all_of(b.p, b.p + b.n, [&](std::byte c) { return static_cast<unsigned char>(c) == b.fill; });
    };
    std::vector<block> live;
    std::map<const void*, std::size_t> spans;   // small spans seen: base -> bytes
    for (int i = 0; i < 20000; ++i) {
        const bool large = i % 61 == 0;
        const std::size_t n = large ? 65 * 1024 + 4096 * (rng() % 7) : 8 + rng() % 1017;
        auto* p = static_cast<std::byte*>(h->allocate(al::request{n}));
        REQUIRE(p != nullptr);
        const auto fill = static_cast<unsigned char>(rng());
        std::memset(p, fill, n);
        live.push_back({p, n, fill});
        if (!large) {
            const auto* sp = H::span_at(p);
            REQUIRE(sp != nullptr);
            spans[sp->base] = sp->bytes;
        }
        if (rng() % 3 == 0) {   // frees from anywhere, so that spans' stacks fill and empty
            const std::size_t j = rng() % live.size();
            REQUIRE(intact(live[j]));
            h->deallocate(live[j].p);
            live[j] = live.back();
            live.pop_back();
        }
    }
    std::size_t cut = 0;
    for (const auto& [base, bytes] : spans) {
        const auto a = reinterpret_cast<std::uintptr_t>(base);
        CHECK(a / vicinity == (a + bytes - 1) / vicinity);
        if (bytes < 16 * 1024) ++cut;
    }
    CHECK(spans.size() > 50);
    CHECK(cut > 0);   // the case arose
    for (const block& b : live) {
        REQUIRE(intact(b));
        h->deallocate(b.p);
    }
}
TEST_CASE("model: medius_heap", "[model]") { run_model<al::medius_heap<tracking_source>>("medius", 104); }
TEST_CASE("model: Medius over size classes", "[model]") {
    run_model<al::heap<al::medius_classed_partition<>, tracking_source, al::medius_heap_options>>("medius classed", 110);
}
TEST_CASE("model: defero_heap", "[model]") { run_model<al::defero_heap<tracking_source>>("defero", 105); }
// Non-default parameters (a quarter of the operations each): smaller
// vicinities, aliasing SK-bit classes, larger vicinities and refill spans.
TEST_CASE("model: velox_heap with 4 KiB vicinities", "[model]") {
    run_model<al::velox_heap<tracking_source, al::heap_options<>, 12>>("velox<12>", 106, 4);
}
TEST_CASE("model: medius_heap with S=6, K=10", "[model]") {
    run_model<al::medius_heap<tracking_source, al::heap_options<>, 6, 10>>("medius<6,10>", 107, 4);
}
// 64-byte classes aliasing every 64 KiB: a class holds many sizes, which
// claim its two ways in turn and spill into its list.
TEST_CASE("model: Medius over size classes with S=6, K=10", "[model]") {
    run_model<al::heap<al::medius_classed_partition<6, 10>, tracking_source, al::medius_heap_options>>(
        "medius classed<6,10>", 111, 4);
}
TEST_CASE("model: defero_heap with 64 KiB vicinities and 16 KiB refills", "[model]") {
    run_model<al::defero_heap<tracking_source, al::heap_options<16384>, 16>>("defero<16>", 108, 4);
}
