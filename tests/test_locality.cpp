// Placement rules of the locality allocators (issue 3).
//
// Velox:  the hint's vicinity (64 KiB) when it holds a free chunk of the exact
//         size; else the vicinity used last; else the lowest vicinity with the
//         size; else a refill.
// Medius: the same on SK-classes (4 KiB pages aliasing every 256 MiB).
// Defero: the size class first; inside it the hint's page, else the page this
//         size class used last (`next`), else the lowest page with the size.
//
// The deterministic cases build a heap with many blocks, free chosen ones and
// ask with hints. A heap also holds chunks it carved but never handed out (the
// rest of the current refill span, and what was left of the wilderness at the
// last growth): both lie next to the most recently carved blocks, so the cases
// only use classes away from those ("safe" classes), where the free chunks are
// exactly the ones the test freed. The model-based tests run a million random
// operations each and check the placement rule whenever the reference (the
// chunks the test freed, per class and size) says the hint's class has one.
#include "catch.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <unordered_map>
#include <vector>

#include <allotheque/allocators/defero.hpp>
#include <allotheque/allocators/medius.hpp>
#include <allotheque/allocators/velox.hpp>
#include <allotheque/backend/page_map.hpp>
#include <allotheque/sources/counting_source.hpp>

namespace al = allotheque;

namespace {

using velox = al::velox_heap<>;
using medius = al::medius_heap<>;
using defero = al::defero_heap<>;

std::uintptr_t addr(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

// The class a heap's placement rule talks about.
std::uint64_t velox_class(const void* p) { return addr(p) >> 16; }
std::uint64_t medius_class(const void* p) { return (addr(p) >> 12) & 0xFFFF; }
std::uint64_t page_of(const void* p) { return addr(p) >> 12; }

template <class Heap>
void* alloc(Heap& h, std::size_t n, const void* hint) {
    return h.allocate(al::request{n, hint, 0});
}
template <class Heap>
void release(Heap& h, void* p, std::size_t n) {
    h.deallocate(p, al::request{n, nullptr, 0});
}

// A heap full of blocks, with the classes that are safe for exact statements.
template <class Heap, class ClassOf>
struct layout {
    Heap& heap;
    ClassOf class_of;
    std::vector<void*> blocks;
    std::vector<std::size_t> sizes;
    std::map<std::uint64_t, std::vector<std::size_t>> by_class;   // class -> indices of live blocks
    std::set<std::uint64_t> unsafe;

    layout(Heap& h, ClassOf c, std::size_t count, const std::vector<std::size_t>& size_cycle)
        : heap(h), class_of(c) {
        for (std::size_t i = 0; i < count; ++i) {
            const std::size_t n = size_cycle[i % size_cycle.size()];
            blocks.push_back(alloc(heap, n, nullptr));
            sizes.push_back(n);
        }
        // Carved-but-unused chunks sit next to the latest blocks (same or next page).
        for (std::size_t i = count > 1200 ? count - 1200 : 0; i < count; ++i)
            for (const std::uintptr_t d : {std::uintptr_t{0}, std::uintptr_t{4096}, std::uintptr_t{8192}}) {
                unsafe.insert(class_of(reinterpret_cast<void*>(addr(blocks[i]) + d)));
                unsafe.insert(class_of(reinterpret_cast<void*>(addr(blocks[i]) - d)));
            }
        for (std::size_t i = 0; i < count; ++i)
            if (!unsafe.count(class_of(blocks[i]))) by_class[class_of(blocks[i])].push_back(i);
    }
    ~layout() {
        for (std::size_t i = 0; i < blocks.size(); ++i)
            if (blocks[i]) release(heap, blocks[i], sizes[i]);
    }
    // Safe classes below every unsafe one (so "lowest class" statements are
    // exact) holding at least `min` live blocks of size n, lowest first.
    std::vector<std::uint64_t> classes(std::size_t n, std::size_t min = 4) const {
        std::vector<std::uint64_t> out;
        for (auto& [c, idx] : by_class) {
            if (!unsafe.empty() && c >= *unsafe.begin()) break;
            std::size_t k = 0;
            for (std::size_t i : idx) k += blocks[i] && sizes[i] == n;
            if (k >= min) out.push_back(c);
        }
        return out;
    }
    // The k-th live block of size n in class c (its index).
    std::size_t pick(std::uint64_t c, std::size_t n, std::size_t k = 0) const {
        for (std::size_t i : by_class.at(c))
            if (blocks[i] && sizes[i] == n && k-- == 0) return i;
        FAIL("no such block");
        return 0;
    }
    void* free_block(std::size_t i) {
        void* p = blocks[i];
        release(heap, p, sizes[i]);
        blocks[i] = nullptr;
        return p;
    }
    void* live(std::uint64_t c, std::size_t n, std::size_t k = 0) const { return blocks[pick(c, n, k)]; }
};
template <class Heap, class ClassOf>
layout(Heap&, ClassOf, std::size_t, const std::vector<std::size_t>&) -> layout<Heap, ClassOf>;

} // namespace

// ---------------------------------------------------------------------------
TEST_CASE("velox: the hint's vicinity wins whenever it has the exact size", "[locality][velox]") {
    velox h;
    layout L(h, velox_class, 40000, {32, 64});
    auto cs = L.classes(32);
    REQUIRE(cs.size() >= 6);
    const auto A = cs[0], B = cs[2], C = cs[4];
    void* a = L.free_block(L.pick(A, 32));
    void* b = L.free_block(L.pick(B, 32));
    void* c = L.free_block(L.pick(C, 32));
    // Each of A, B, C holds exactly one free 32-byte chunk: the hint decides.
    CHECK(alloc(h, 32, L.live(B, 32)) == b);
    CHECK(alloc(h, 32, L.live(C, 64)) == c);   // any address in the vicinity will do
    CHECK(alloc(h, 32, L.live(A, 32)) == a);
    // Exact size: a free 64-byte chunk in the hint's vicinity does not serve 32.
    void* b64 = L.free_block(L.pick(B, 64));
    void* a32 = L.free_block(L.pick(A, 32, 1));
    CHECK(alloc(h, 32, L.live(B, 32)) == a32);
    CHECK(alloc(h, 64, L.live(B, 32)) == b64);
}

TEST_CASE("velox: fallback to the last used vicinity, then the lowest, then a refill", "[locality][velox]") {
    velox h;
    layout L(h, velox_class, 40000, {32});
    auto cs = L.classes(32);
    REQUIRE(cs.size() >= 6);
    const auto A = cs[0], C = cs[2], D = cs[3], E = cs[4];
    void* a = L.free_block(L.pick(A, 32));
    void* e = L.free_block(L.pick(E, 32));
    void* c1 = L.free_block(L.pick(C, 32));
    void* c2 = L.free_block(L.pick(C, 32, 1));
    // Use C once: it becomes the last used vicinity.
    void* got = alloc(h, 32, L.live(C, 32));
    CHECK((got == c1 || got == c2));
    void* c_rest = got == c1 ? c2 : c1;
    // D has nothing: the last used vicinity (C) beats the lower A.
    CHECK(alloc(h, 32, L.live(D, 32)) == c_rest);
    // C is empty now: the lowest vicinity with the size (A, not E).
    CHECK(alloc(h, 32, L.live(D, 32)) == a);
    // A is now the last used one, and empty; E is the only one left.
    CHECK(alloc(h, 32, nullptr) == e);
    // No safe vicinity has a 32-byte chunk: the block comes from unused or fresh memory.
    void* fresh = alloc(h, 32, L.live(D, 32));
    CHECK(L.by_class.count(velox_class(fresh)) == 0);
    release(h, fresh, 32);
    for (void* p : {c1, c2, a, e}) release(h, p, 32);   // handed out again above; give back
}

TEST_CASE("velox: a size never seen before refills; the next request of it stays with the refill",
          "[locality][velox]") {
    al::velox_heap<al::counting_source<al::arena_source>> h;
    void* first = alloc(h, 40, nullptr);
    void* second = alloc(h, 40, first);
    CHECK(velox_class(second) == velox_class(first));
    CHECK(addr(second) == addr(first) + 40);   // carved upwards from the span
    release(h, first, 40);
    release(h, second, 40);
    void* again = alloc(h, 40, nullptr);
    CHECK((again == first || again == second));
    release(h, again, 40);
}

// ---------------------------------------------------------------------------
TEST_CASE("medius: the hint's page class wins, aliasing included", "[locality][medius]") {
    medius h;
    layout L(h, medius_class, 20000, {32, 64});
    // A fresh heap carves each page for one size: pages of 32s and pages of 64s.
    auto cs = L.classes(32);
    auto c64 = L.classes(64);
    REQUIRE(cs.size() >= 6);
    REQUIRE(c64.size() >= 2);
    const auto A = cs[0], B = cs[3], C = cs[5], P = c64[1];
    void* a = L.free_block(L.pick(A, 32));
    void* b = L.free_block(L.pick(B, 32));
    void* c = L.free_block(L.pick(C, 32));
    CHECK(alloc(h, 32, L.live(B, 32)) == b);
    CHECK(alloc(h, 32, static_cast<char*>(L.live(C, 32)) + 1) == c);   // any address in the page will do
    // An address 256 MiB away has the same SK-bits: it names A's class.
    const void* alias = reinterpret_cast<const void*>(addr(L.live(A, 32)) + (std::uintptr_t{1} << 28));
    REQUIRE(medius_class(alias) == A);
    CHECK(alloc(h, 32, alias) == a);
    // Exact size inside the class: P's free 64 does not serve 32.
    void* p64 = L.free_block(L.pick(P, 64));
    void* a32 = L.free_block(L.pick(A, 32, 1));
    CHECK(alloc(h, 32, L.live(P, 64)) == a32);
    CHECK(alloc(h, 64, L.live(P, 64)) == p64);
}

TEST_CASE("medius: fallback to the last used class, then the lowest class", "[locality][medius]") {
    medius h;
    layout L(h, medius_class, 20000, {32});
    auto cs = L.classes(32);
    REQUIRE(cs.size() >= 8);
    const auto A = cs[0], C = cs[2], D = cs[3], E = cs[4];
    void* a = L.free_block(L.pick(A, 32));
    void* e = L.free_block(L.pick(E, 32));
    void* c1 = L.free_block(L.pick(C, 32));
    void* c2 = L.free_block(L.pick(C, 32, 1));
    void* got = alloc(h, 32, L.live(C, 32));
    CHECK((got == c1 || got == c2));
    void* c_rest = got == c1 ? c2 : c1;
    CHECK(alloc(h, 32, L.live(D, 32)) == c_rest);
    CHECK(alloc(h, 32, L.live(D, 32)) == a);
    CHECK(alloc(h, 32, nullptr) == e);
    for (void* p : {c1, c2, a, e}) release(h, p, 32);
}

// "Used last" counts frees: in steady churn the hint's class rarely holds the
// size, and the chunk freed a moment ago (still in cache) is taken instead of
// the lowest one.
template <class Heap, class ClassOf>
void check_free_counts_as_use(ClassOf class_of, std::size_t count) {
    Heap h;
    layout L(h, class_of, count, {32});
    auto cs = L.classes(32);
    REQUIRE(cs.size() >= 6);
    const auto A = cs[0], C = cs[2], D = cs[3];
    void* a = L.free_block(L.pick(A, 32));
    void* c = L.free_block(L.pick(C, 32));   // the last free: C is the class used last
    CHECK(alloc(h, 32, L.live(D, 32)) == c);   // not the lower A
    CHECK(alloc(h, 32, L.live(D, 32)) == a);   // C is empty: the lowest again
    // The order of the frees decides: A, freed after C, serves first.
    void* c2 = L.free_block(L.pick(C, 32, 1));
    void* a2 = L.free_block(L.pick(A, 32, 1));
    CHECK(alloc(h, 32, L.live(D, 32)) == a2);   // A: freed last, and lowest
    CHECK(alloc(h, 32, L.live(D, 32)) == c2);
    for (void* p : {a, c, a2, c2}) release(h, p, 32);
}

TEST_CASE("velox, medius: a free makes its class the one used last", "[locality][velox][medius]") {
    check_free_counts_as_use<velox>(velox_class, 40000);
    check_free_counts_as_use<medius>(medius_class, 20000);
}

// ---------------------------------------------------------------------------
TEST_CASE("defero: size class first, then the hint's page", "[locality][defero]") {
    defero h;
    layout L(h, page_of, 20000, {48, 64, 200, 256});
    auto c48 = L.classes(48), c64 = L.classes(64), c200 = L.classes(200), c256 = L.classes(256);
    REQUIRE(c48.size() >= 6);
    REQUIRE(c64.size() >= 2);
    REQUIRE(c200.size() >= 3);
    REQUIRE(c256.size() >= 2);
    const auto A = c48[0], B = c48[3], C = c48[5], P = c64[1];
    void* a = L.free_block(L.pick(A, 48));
    void* b = L.free_block(L.pick(B, 48));
    void* c = L.free_block(L.pick(C, 48));
    void* p1 = L.free_block(L.pick(P, 64));
    void* p2 = L.free_block(L.pick(P, 64, 1));
    CHECK(alloc(h, 48, L.live(B, 48)) == b);
    CHECK(alloc(h, 48, static_cast<char*>(L.live(C, 48)) + 8) == c);
    void* got = alloc(h, 64, L.live(P, 64));   // size 64 now remembers P
    CHECK((got == p1 || got == p2));
    // Size first: B's page has no 64; the 64s' last page P does.
    CHECK(alloc(h, 64, L.live(B, 48)) == (got == p1 ? p2 : p1));
    // P has no 48, and the 48s' last page (C) emptied: the lowest page with a 48.
    CHECK(alloc(h, 48, L.live(P, 64)) == a);
    // The overflow class (> 128 bytes) mixes sizes: the page must have the exact one.
    const auto A2 = c200[0], C2 = c200[2], B2 = c256[1];
    void* a200 = L.free_block(L.pick(A2, 200));
    void* b256 = L.free_block(L.pick(B2, 256));
    void* c200k = L.free_block(L.pick(C2, 200));
    CHECK(alloc(h, 200, L.live(C2, 200)) == c200k);
    CHECK(alloc(h, 256, L.live(A2, 200)) == b256);   // A2 has a 200 only; C2 is empty: lowest page with 256
    CHECK(alloc(h, 200, L.live(B2, 256)) == a200);
}

TEST_CASE("defero: `next` remembers the last page per size class", "[locality][defero]") {
    defero h;
    layout L(h, page_of, 20000, {48, 64});
    auto c48 = L.classes(48), c64 = L.classes(64);
    REQUIRE(c48.size() >= 8);
    REQUIRE(c64.size() >= 2);
    const auto A = c48[0], B = c48[2], E = c48[4], F = c48[6], P = c64[1];
    void* a = L.free_block(L.pick(A, 48));
    void* b1 = L.free_block(L.pick(B, 48));
    void* b2 = L.free_block(L.pick(B, 48, 1));
    void* e48 = L.free_block(L.pick(E, 48));
    void* p64 = L.free_block(L.pick(P, 64));
    void* got = alloc(h, 48, L.live(B, 48));   // size 48's last used page: B
    CHECK((got == b1 || got == b2));
    void* b_rest = got == b1 ? b2 : b1;
    CHECK(alloc(h, 64, L.live(P, 64)) == p64);   // size 64's last page: P (also the heap's last)
    // F has no free 48: Defero goes to the page *this size class* used last (B),
    // even though A is lower and another size was allocated since.
    CHECK(alloc(h, 48, L.live(F, 48)) == b_rest);
    // B is empty now: the lowest page with a 48 (A, not E).
    CHECK(alloc(h, 48, L.live(F, 48)) == a);
    CHECK(alloc(h, 48, L.live(F, 48)) == e48);
    for (void* q : {b1, b2, a, e48}) release(h, q, 48);
    release(h, p64, 64);
}

// ---------------------------------------------------------------------------
// Model-based: a million random operations per heap. The reference holds the
// chunks the test freed, per (class, good size); a chunk the heap carved but
// never handed out is unknown to it, so the placement rule is checked in the
// direction that is decidable: when the reference has a chunk of the size in the
// hint's class, the block must come from that class. For Velox and Medius the
// fallback is checked too (`fallback_rule`): a block from neither the hint's
// class nor the class served from last must come from the lowest class holding
// the size (no freed chunk of that size may lie in a lower class), and a
// refill may only happen when no freed chunk of the size is left anywhere.
namespace {

struct model_options {
    std::size_t ops = 1'000'000;
    bool alternate = false;      // sizes in turn (32, 544, 32, ...) instead of at random
    bool holes = false;          // at each phase change, free every other live block
    bool fallback_rule = false;  // check the fallback (Velox, Medius)
};

struct live_block {
    std::byte* p;
    std::size_t n;
    std::uint8_t tag;
};

template <class Heap, class ClassOf>
void model_run(ClassOf class_of, const std::vector<std::size_t>& sizes, std::uint32_t seed, model_options opt = {}) {
    {
        Heap h;
        std::mt19937_64 rng(seed);
        std::vector<live_block> live;
        std::map<std::uintptr_t, std::uintptr_t> extent;   // start -> end of live blocks
        std::unordered_map<const void*, std::uint64_t> free_key;
        std::unordered_map<std::uint64_t, std::size_t> free_count;
        auto key = [&](const void* p, std::size_t good) { return (class_of(p) << 13) | good; };
        // (good size, class) -> freed chunks: the lowest class holding a size.
        std::map<std::pair<std::size_t, std::uint64_t>, std::size_t> by_size;
        auto count_free = [&](std::uint64_t k, int d) {
            const std::pair<std::size_t, std::uint64_t> e{k & ((std::uint64_t{1} << 13) - 1), k >> 13};
            if ((by_size[e] += static_cast<std::size_t>(d)) == 0) by_size.erase(e);
        };
        // The class used last: served from, or freed into (match_last_first),
        // or filled by a refill (its chunks go into the partition as frees).
        std::uint64_t last_class = ~std::uint64_t{0};
        std::size_t checked = 0, fell_back = 0, reclaims = 0, walks_checked = 0;
        // A reclaim gives fully free spans back: their chunks leave the heap's
        // classes, so the reference forgets those (and only those).
        auto forget_reclaimed = [&] {
            if (h.stats().reclaims == reclaims) return;
            reclaims = h.stats().reclaims;
            auto& map = al::backend::page_map::instance();
            for (auto it = free_key.begin(); it != free_key.end();) {
                const al::backend::span* sp = map.find(it->first);
                if (sp && sp->owner == &h && sp->state == al::backend::span_state::small &&
                    sp->chunk == (it->second & ((std::uint64_t{1} << 13) - 1))) {
                    ++it;
                    continue;
                }
                --free_count[it->second];
                count_free(it->second, -1);
                it = free_key.erase(it);
            }
        };
        std::size_t target = 4000, turn = 0;
        auto free_at = [&](std::size_t i, std::size_t op) {
            const live_block b = live[i];
            live[i] = live.back();
            live.pop_back();
            for (std::size_t k = 0; k < b.n; ++k)
                if (b.p[k] != std::byte{b.tag}) FAIL("content of a live block changed at op " << op);
            extent.erase(addr(b.p));
            const std::size_t good = Heap::good_size(b.n);
            release(h, b.p, b.n);
            last_class = class_of(b.p);
            free_key[b.p] = key(b.p, good);
            ++free_count[key(b.p, good)];
            count_free(key(b.p, good), +1);
            forget_reclaimed();
        };

        for (std::size_t op = 0; op < opt.ops; ++op) {
            if (op % 100'000 == 0) {
                target = 1000 + rng() % 30000;   // phases of growth and shrinkage
                if (opt.holes && !live.empty()) {
                    // Every other block in address order: holes between live neighbours.
                    std::sort(live.begin(), live.end(), [](const live_block& a, const live_block& b) { return a.p < b.p; });
                    for (std::size_t i = live.size() & ~std::size_t{1}; i > 0; i -= 2) free_at(i - 1, op);
                }
            }
            const bool do_alloc = live.empty() || (live.size() < target ? rng() % 100 < 65 : rng() % 100 < 35);
            if (do_alloc) {
                const std::size_t n = opt.alternate ? sizes[turn++ % sizes.size()] : sizes[rng() % sizes.size()];
                const std::size_t good = Heap::good_size(n);
                const void* hint = nullptr;
                if (!live.empty() && rng() % 10 != 0) hint = live[rng() % live.size()].p;
                bool must_match = false;
                if (hint) {
                    auto it = free_count.find(key(hint, good));
                    must_match = it != free_count.end() && it->second > 0;
                }
                const std::size_t span_bytes = h.stats().small_span_bytes;
                auto* p = static_cast<std::byte*>(alloc(h, n, hint));
                REQUIRE(p != nullptr);
                const bool refilled = h.stats().small_span_bytes > span_bytes;
                forget_reclaimed();
                if (opt.fallback_rule) {
                    const auto lowest = by_size.lower_bound({good, 0});
                    const bool any = lowest != by_size.end() && lowest->first.first == good;
                    if (refilled) {
                        if (any) FAIL("refill while class " << lowest->first.second << " holds size " << good
                                                             << " at op " << op);
                        last_class = class_of(p);
                    } else {
                        if ((!hint || class_of(p) != class_of(hint)) && class_of(p) != last_class) {
                            ++walks_checked;
                            if (any && lowest->first.second < class_of(p))
                                FAIL("fallback took class " << class_of(p) << " while class " << lowest->first.second
                                                            << " holds size " << good << " at op " << op);
                        }
                        last_class = class_of(p);
                    }
                }
                if (must_match) {
                    ++checked;
                    if (class_of(p) != class_of(hint)) FAIL("placement rule broken at op " << op);
                } else if (hint && class_of(p) != class_of(hint)) {
                    ++fell_back;
                }
                if (auto it = free_key.find(p); it != free_key.end()) {
                    --free_count[it->second];
                    count_free(it->second, -1);
                    free_key.erase(it);
                }
                // No overlap with any live block.
                const std::uintptr_t s = addr(p), e = s + good;
                auto nx = extent.lower_bound(s);
                if (nx != extent.end() && nx->first < e) FAIL("overlap with a later block at op " << op);
                if (nx != extent.begin() && std::prev(nx)->second > s) FAIL("overlap with an earlier block at op " << op);
                extent.emplace(s, e);
                if (s % std::min<std::size_t>(good & (~good + 1), 4096) != 0) FAIL("misaligned at op " << op);
                const auto tag = static_cast<std::uint8_t>(rng());
                std::memset(p, tag, n);
                live.push_back({p, n, tag});
            } else {
                free_at(rng() % live.size(), op);
            }
        }
        INFO("decidable placements checked: " << checked << ", fell back: " << fell_back
                                              << ", fallbacks checked: " << walks_checked);
        CHECK(checked > 10'000);
        CHECK(fell_back > 0);
        if (opt.fallback_rule) CHECK(walks_checked > 1000);
        for (const live_block& b : live) release(h, b.p, b.n);
        CHECK(h.source().bytes() > 0);
    }
}

} // namespace

TEST_CASE("velox: model-based, 1M operations", "[locality][velox][model]") {
    model_run<al::velox_heap<al::counting_source<al::arena_source>>>(
        velox_class, {16, 24, 32, 40, 48, 64, 96, 128}, 12345, {.fallback_rule = true});
}

TEST_CASE("medius: model-based, 1M operations", "[locality][medius][model]") {
    model_run<al::medius_heap<al::counting_source<al::arena_source>>>(
        medius_class, {16, 24, 32, 40, 48, 64, 96, 128}, 23456, {.fallback_rule = true});
}

// What the size directory is for: sizes in turn that no hint's class holds
// (32 and 544 share no class for long), and holes of every other block.
TEST_CASE("velox: model-based, alternating 32/544 with holes", "[locality][velox][model][size_directory]") {
    model_run<al::velox_heap<al::counting_source<al::arena_source>>>(
        velox_class, {32, 544}, 4321, {.ops = 400'000, .alternate = true, .holes = true, .fallback_rule = true});
}

TEST_CASE("medius: model-based, alternating 32/544 with holes", "[locality][medius][model][size_directory]") {
    model_run<al::medius_heap<al::counting_source<al::arena_source>>>(
        medius_class, {32, 544}, 5432, {.ops = 400'000, .alternate = true, .holes = true, .fallback_rule = true});
}

TEST_CASE("defero: model-based, 1M operations", "[locality][defero][model]") {
    model_run<al::defero_heap<al::counting_source<al::arena_source>>>(page_of, {16, 40, 48, 64, 96, 128, 136, 200, 256},
                                                                       34567);
}
