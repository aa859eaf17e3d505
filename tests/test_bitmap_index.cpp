// detail::bitmap_tree and the class indexes (dense_index, sparse_index) against
// std::set references under random operations.
#include "catch.hpp"

#include <allotheque/containers/class_index.hpp>
#include <allotheque/detail/bitmap_tree.hpp>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <random>
#include <set>
#include <vector>

namespace al = allotheque;
using al::detail::npos;

namespace {

std::size_t ref_next(const std::set<std::size_t>& s, std::size_t i) {
    auto it = s.lower_bound(i);
    return it == s.end() ? npos : *it;
}
std::size_t ref_prev(const std::set<std::size_t>& s, std::size_t i) {
    auto it = s.upper_bound(i);
    return it == s.begin() ? npos : *std::prev(it);
}

template <std::size_t N>
void bitmap_against_set(std::size_t ops, unsigned seed) {
    using tree = al::detail::bitmap_tree<N>;
    std::vector<std::uint64_t> words(tree::storage_words, 0);
    tree t(words.data());
    std::set<std::size_t> ref;
    std::mt19937_64 rng(seed);
    // Clustered positions exercise the upper levels (whole words emptying).
    std::uniform_int_distribution<std::size_t> pos(0, N - 1);
    for (std::size_t k = 0; k < ops; ++k) {
        const unsigned op = rng() % 8;
        std::size_t i = pos(rng);
        if (op < 3) {
            t.set(i);
            ref.insert(i);
        } else if (op < 5) {
            // reset a present position when there is one (keeps the set from only growing)
            if (!ref.empty() && rng() % 2) {
                auto it = ref.lower_bound(i);
                if (it == ref.end()) it = ref.begin();
                i = *it;
            }
            t.reset(i);
            ref.erase(i);
        } else {
            REQUIRE(t.find_next(i) == ref_next(ref, i));
            REQUIRE(t.find_prev(i) == ref_prev(ref, i));
            REQUIRE(t.test(i) == (ref.count(i) == 1));
        }
        if (k % 97 == 0) REQUIRE(t.find_next(0) == ref_next(ref, 0));
        REQUIRE(t.empty() == ref.empty());
    }
    // Exhaustive walk at the end.
    std::size_t at = t.find_next(0);
    for (std::size_t v : ref) {
        REQUIRE(at == v);
        at = t.find_next(v + 1);
    }
    REQUIRE(at == npos);
    REQUIRE(t.find_next(N) == npos);
    REQUIRE(t.find_prev(N) == ref_prev(ref, N));
    // And backwards.
    at = t.find_prev(N - 1);
    for (auto it = ref.rbegin(); it != ref.rend(); ++it) {
        REQUIRE(at == *it);
        at = *it == 0 ? npos : t.find_prev(*it - 1);
    }
    REQUIRE(at == npos);
    // Empty everything: every level must go back to zero.
    for (std::size_t v : ref) t.reset(v);
    REQUIRE(t.find_next(0) == npos);
    REQUIRE(t.empty());
    for (std::uint64_t w : words) REQUIRE(w == 0);
}

} // namespace

static_assert(al::detail::bitmap_layout<64>::levels == 1);
static_assert(al::detail::bitmap_layout<65>::levels == 2);
static_assert(al::detail::bitmap_layout<4096>::levels == 2);
static_assert(al::detail::bitmap_layout<65536>::levels == 3);
static_assert(al::detail::bitmap_layout<(1u << 19)>::levels == 4);
static_assert(al::detail::bitmap_layout<4096>::total_words == 64 + 1);

TEST_CASE("bitmap_tree: edge positions", "[bitmap]") {
    using tree = al::detail::bitmap_tree<65536>;
    std::vector<std::uint64_t> words(tree::storage_words, 0);
    tree t(words.data());
    CHECK(t.find_next(0) == npos);
    t.set(65535);
    CHECK(t.find_next(0) == 65535u);
    CHECK(t.find_next(65535) == 65535u);
    CHECK(t.find_next(65536) == npos);
    t.set(0);
    t.set(63);
    t.set(64);
    t.set(4095);
    t.set(4096);
    CHECK(t.find_next(0) == 0u);
    CHECK(t.find_next(1) == 63u);
    CHECK(t.find_next(64) == 64u);
    CHECK(t.find_next(65) == 4095u);
    CHECK(t.find_next(4096) == 4096u);
    CHECK(t.find_next(4097) == 65535u);
    t.reset(4096);
    CHECK(t.find_next(4096) == 65535u);
    t.reset(65535);
    CHECK(t.find_next(4096) == npos);
    // Setting twice / resetting an absent bit changes nothing.
    t.set(63);
    t.reset(62);
    CHECK(t.find_next(1) == 63u);
}

TEST_CASE("bitmap_tree<64> random operations", "[bitmap]") { bitmap_against_set<64>(20000, 1); }
TEST_CASE("bitmap_tree<4096> random operations", "[bitmap]") { bitmap_against_set<4096>(100000, 2); }
TEST_CASE("bitmap_tree<65536> random operations", "[bitmap]") { bitmap_against_set<65536>(200000, 3); }
TEST_CASE("bitmap_tree<2^19> random operations", "[bitmap]") { bitmap_against_set<(1u << 19)>(200000, 4); }
TEST_CASE("bitmap_tree<1000> (not a power of 64) random operations", "[bitmap]") {
    bitmap_against_set<1000>(50000, 5);
}

namespace {

struct header {
    std::uint64_t marker;
    std::uint64_t payload;
};
inline int init_calls = 0;
struct init_header {
    void operator()(header& h) const noexcept {
        ++init_calls;
        h.marker = 0xC1A55;
        h.payload = 0;
    }
};

// Drives any index (dense or sparse) against a reference set. `prepare` is
// called before obtain as a heap would.
template <class Index>
void index_against_set(Index& idx, std::size_t classes, std::size_t ops, unsigned seed,
                       std::vector<std::size_t> const& pool) {
    std::set<std::size_t> ref;
    std::mt19937_64 rng(seed);
    REQUIRE(idx.first() == npos);
    for (std::size_t k = 0; k < ops; ++k) {
        const std::size_t i = pool[rng() % pool.size()];
        REQUIRE(i < classes);
        switch (rng() % 6) {
        case 0:
        case 1: {
            REQUIRE(idx.prepare(i, i));
            const bool fresh = ref.insert(i).second;
            const int before = init_calls;
            header& h = idx.obtain(i);
            REQUIRE(init_calls == before + (fresh ? 1 : 0));   // constructed only when the class appears
            REQUIRE(h.marker == 0xC1A55u);
            if (fresh) REQUIRE(h.payload == 0u);
            h.payload = i * 3 + 1;   // must survive until released
            REQUIRE(idx.find(i) == &h);
            break;
        }
        case 2:
            if (ref.count(i)) {
                idx.release(i);
                ref.erase(i);
            }
            REQUIRE(idx.find(i) == nullptr);
            REQUIRE(!idx.contains(i));
            break;
        case 3:
            REQUIRE(idx.first() == ref_next(ref, 0));
            break;
        case 4:
            REQUIRE(idx.next(i) == ref_next(ref, i + 1));
            break;
        default: {
            header* h = idx.find(i);
            REQUIRE((h != nullptr) == (ref.count(i) == 1));
            REQUIRE(idx.contains(i) == (ref.count(i) == 1));
            if (h) REQUIRE(h->payload == i * 3 + 1);
        }
        }
    }
    // Full walk.
    std::size_t at = idx.first();
    for (std::size_t v : ref) {
        REQUIRE(at == v);
        REQUIRE(idx.find(v)->payload == v * 3 + 1);
        at = idx.next(v);
    }
    REQUIRE(at == npos);
    for (std::size_t v : ref) idx.release(v);
    REQUIRE(idx.first() == npos);
    // A released class comes back freshly initialised.
    if (!ref.empty()) {
        const std::size_t v = *ref.begin();
        REQUIRE(idx.prepare(v, v));
        const int before = init_calls;
        REQUIRE(idx.obtain(v).payload == 0u);
        REQUIRE(init_calls == before + 1);
        idx.release(v);
    }
}

} // namespace

TEST_CASE("dense_index (inline table) against a reference", "[index]") {
    using idx_t = al::dense_index<64, header, init_header>;
    static_assert(idx_t::classes == 64);
    auto idx = std::make_unique<idx_t>();
    std::vector<std::size_t> pool;
    for (std::size_t i = 0; i < 64; ++i) pool.push_back(i);
    index_against_set(*idx, 64, 20000, 11, pool);
    CHECK(idx->metadata_bytes() == 64 * sizeof(header));
}

TEST_CASE("dense_index (mapped table, 2^16 classes) against a reference", "[index]") {
    using idx_t = al::dense_index<65536, header, init_header>;
    auto idx = std::make_unique<idx_t>();
    std::vector<std::size_t> pool;
    std::mt19937 rng(7);
    for (std::size_t i = 0; i < 2000; ++i) pool.push_back(rng() % 65536);
    for (std::size_t i : {0u, 1u, 63u, 64u, 4095u, 4096u, 65534u, 65535u}) pool.push_back(i);
    index_against_set(*idx, 65536, 100000, 12, pool);
}

TEST_CASE("sparse_index<31> against a reference", "[index]") {
    using idx_t = al::sparse_index<31, header, init_header>;
    static_assert(idx_t::classes == (std::size_t{1} << 31));
    auto idx = std::make_unique<idx_t>();
    CHECK(idx->metadata_bytes() == 0u);
    // Classes around a few leaves (4096 classes each), including the extremes
    // and leaf boundaries, and a sprinkle over the whole range.
    std::vector<std::size_t> pool;
    std::mt19937_64 rng(13);
    const std::size_t top = (std::size_t{1} << 31) - 1;
    for (std::size_t base : {std::size_t{0}, std::size_t{4096} * 7, std::size_t{0x7fff1234}, top - 5000}) {
        for (int k = 0; k < 300; ++k) pool.push_back(base + rng() % 5000);
    }
    for (std::size_t i : {std::size_t{0}, std::size_t{4095}, std::size_t{4096}, top, top - 4096, top - 4095})
        pool.push_back(i);
    for (int k = 0; k < 60; ++k) pool.push_back(rng() % (top + 1));
    index_against_set(*idx, top + 1, 150000, 14, pool);
    CHECK(idx->metadata_bytes() > 0u);
}

TEST_CASE("sparse_index: prepare maps the whole range of leaves", "[index]") {
    using idx_t = al::sparse_index<20, header, init_header>;
    auto idx = std::make_unique<idx_t>();
    REQUIRE(idx->prepare(4000, 3 * 4096 + 5));   // spans 4 leaves
    const std::size_t one_leaf = idx->metadata_bytes() / 4;
    CHECK(idx->metadata_bytes() == 4 * one_leaf);
    REQUIRE(idx->prepare(4096, 4100));   // already mapped: no growth
    CHECK(idx->metadata_bytes() == 4 * one_leaf);
    // Every class in the prepared range can be obtained.
    for (std::size_t i : {4000u, 4095u, 4096u, 8191u, 8192u, 12288u, 12293u}) idx->obtain(i).payload = i;
    CHECK(idx->first() == 4000u);
    CHECK(idx->next(4000) == 4095u);
    CHECK(idx->next(8192) == 12288u);
    CHECK(idx->next(12293) == npos);
    for (std::size_t i : {4000u, 4095u, 4096u, 8191u, 8192u, 12288u, 12293u}) idx->release(i);
    CHECK(idx->first() == npos);
}

TEST_CASE("sparse_index with fewer than 12 bits is one leaf", "[index]") {
    using idx_t = al::sparse_index<6, header, init_header>;
    auto idx = std::make_unique<idx_t>();
    std::vector<std::size_t> pool;
    for (std::size_t i = 0; i < 64; ++i) pool.push_back(i);
    index_against_set(*idx, 64, 20000, 15, pool);
}

// The index keeps the leaf prepared last beside the table (leaf_at): lookups
// in that leaf skip the leaf table, the others must still go through it.
TEST_CASE("sparse_index: classes outside the leaf prepared last stay reachable", "[index]") {
    using idx_t = al::sparse_index<31, header, init_header>;
    auto idx = std::make_unique<idx_t>();
    const std::size_t a = 5 * 4096 + 17, b = 900 * 4096 + 3, c = 901 * 4096;   // three leaves
    CHECK(idx->find(a) == nullptr);   // nothing mapped, nothing remembered
    REQUIRE(idx->prepare(a, a));
    idx->obtain(a).payload = 1;
    REQUIRE(idx->prepare(b, c));   // the leaf remembered is now c's
    idx->obtain(b).payload = 2;
    idx->obtain(c).payload = 3;
    REQUIRE(idx->find(a) != nullptr);
    CHECK(idx->find(a)->payload == 1u);
    CHECK(idx->find(b)->payload == 2u);
    CHECK(idx->find(c)->payload == 3u);
    CHECK(idx->find(a + 1) == nullptr);
    CHECK(idx->find(7 * 4096) == nullptr);   // a leaf never mapped
    CHECK(idx->first() == a);
    CHECK(idx->next(a) == b);
    idx->release(a);   // empties a leaf other than the one remembered
    CHECK(idx->first() == b);
    REQUIRE(idx->prepare(a, a));   // back to a's leaf, which stays mapped
    CHECK(idx->find(a) == nullptr);
    CHECK(idx->obtain(a).payload == 0u);   // freshly initialised
    CHECK(idx->find(c)->payload == 3u);
    CHECK(idx->next(b) == c);
}
