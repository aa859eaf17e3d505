// hinted_set / hinted_map reorganize(): the clustered layout of
// stl/hinted_tree.hpp; hinted_list::reorganize() at the end of the file.
// Random operations with reorganisations in between, checked against std::map
// (every element, both directions, lookups, and inserts and erases
// afterwards, which rebalance through the rewritten links and colours); the
// layout itself (clusters in van Emde Boas order, every link upward in memory);
// which path each value type takes; and the bad cases: a heap that refuses a
// node and a copy that throws leave the tree as it was, with nothing leaked.
#include "catch.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <new>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <allotheque/allocators/medius.hpp>
#include <allotheque/allocators/velox.hpp>
#include <allotheque/sources/counting_source.hpp>
#include <allotheque/sources/malloc_source.hpp>
#include <allotheque/stl/hinted_list.hpp>
#include <allotheque/stl/hinted_map.hpp>
#include <allotheque/stl/hinted_set.hpp>

namespace al = allotheque;

namespace {
using counted = al::counting_source<al::malloc_source>;
using velox_c = al::velox_heap<counted>;
using medius_c = al::medius_heap<counted>;

template <class M>
std::vector<const void*> addresses(const M& m) {
    std::vector<const void*> v;
    for (auto it = m.begin(); it != m.end(); ++it) v.push_back(it.address());
    return v;
}

template <class M, class R>
void check_same(const M& m, const R& ref) {
    REQUIRE(m.size() == ref.size());
    CHECK(std::equal(m.begin(), m.end(), ref.begin(), ref.end()));
    CHECK(std::equal(m.rbegin(), m.rend(), ref.rbegin(), ref.rend()));
    for (const auto& [k, v] : ref) {
        auto it = m.find(k);
        REQUIRE(it != m.end());
        CHECK(it->second == v);
    }
}

// A value whose move may throw (so reorganize() copies) and whose copies can
// be made to throw after a countdown.
struct fragile {
    static inline long live = 0;
    static inline int copies_left = -1;   // -1: never throw
    std::uint64_t v = 0;
    explicit fragile(std::uint64_t x = 0) : v(x) { ++live; }
    fragile(const fragile& o) : v(o.v) {
        if (copies_left == 0) throw std::runtime_error("fragile: copy refused");
        if (copies_left > 0) --copies_left;
        ++live;
    }
    fragile(fragile&& o) noexcept(false) : v(o.v) { ++live; }
    fragile& operator=(const fragile&) = default;
    ~fragile() { --live; }
    bool operator==(const fragile& o) const { return v == o.v; }
};

// A heap wrapper that counts the blocks it has handed out and not taken
// back, and refuses every allocation once `left` reaches 0 (-1: never).
template <class H>
struct watched {
    static constexpr std::size_t max_alignment = H::max_alignment;
    H inner;
    long left = -1;
    long live = 0;
    void* allocate(const al::request& r) {
        if (left == 0) throw std::bad_alloc();
        if (left > 0) --left;
        void* p = inner.allocate(r);
        ++live;
        return p;
    }
    void deallocate(void* p, const al::request& r) noexcept {
        inner.deallocate(p, r);
        --live;
    }
};
// The red-black invariants of a hinted tree, read through its protected
// members: every parent link matches, no red node has a red child, every
// path from the root down has as many black nodes, the root is black and the
// header's leftmost and rightmost are right. reorganize() rewrites every link
// and colour, which the element order alone would not show.
template <class Tree>
struct inspected : Tree {
    using Tree::Tree;
    bool valid() const {
        using nt = typename Tree::tree_type::node_traits;
        auto& t = const_cast<typename Tree::tree_type&>(this->tree_);
        const auto header = t.end().pointed_node();
        const auto root = nt::get_parent(header);
        if (!root) return t.empty();
        if (nt::get_parent(root) != header || nt::get_color(root) != nt::black()) return false;
        auto leftmost = root, rightmost = root;
        while (nt::get_left(leftmost)) leftmost = nt::get_left(leftmost);
        while (nt::get_right(rightmost)) rightmost = nt::get_right(rightmost);
        if (nt::get_left(header) != leftmost || nt::get_right(header) != rightmost) return false;
        std::size_t count = 0;
        auto black_height = [&](auto& self, decltype(root) p) -> long {
            if (!p) return 1;
            ++count;
            const auto l = nt::get_left(p), r = nt::get_right(p);
            if ((l && nt::get_parent(l) != p) || (r && nt::get_parent(r) != p)) return -1;
            if (nt::get_color(p) == nt::red() &&
                ((l && nt::get_color(l) == nt::red()) || (r && nt::get_color(r) == nt::red())))
                return -1;
            const long a = self(self, l), b = self(self, r);
            if (a < 0 || a != b) return -1;
            return a + (nt::get_color(p) == nt::black());
        };
        return black_height(black_height, root) > 0 && count == t.size();
    }

    // Over every parent-child link, the share whose child lies above its
    // parent in memory; over the paths from the root to every node, the mean
    // number of distinct 4 KiB pages and 64-byte lines each reads.
    struct path_stats {
        double upward = 0, pages = 0, lines = 0, depth = 0;
    };
    path_stats paths() const {
        using nt = typename Tree::tree_type::node_traits;
        auto& t = const_cast<typename Tree::tree_type&>(this->tree_);
        using node_ptr = decltype(nt::get_parent(t.end().pointed_node()));
        path_stats st;
        std::size_t links = 0, up = 0, nodes = 0;
        std::vector<std::uintptr_t> pages, lines;
        auto walk = [&](auto& self, node_ptr p, std::size_t distinct_pages, std::size_t distinct_lines,
                        std::size_t depth) -> void {
            const auto a = reinterpret_cast<std::uintptr_t>(p);
            const bool new_page = std::find(pages.begin(), pages.end(), a >> 12) == pages.end();
            const bool new_line = std::find(lines.begin(), lines.end(), a >> 6) == lines.end();
            pages.push_back(a >> 12);
            lines.push_back(a >> 6);
            distinct_pages += new_page;
            distinct_lines += new_line;
            ++nodes;
            st.pages += static_cast<double>(distinct_pages);
            st.lines += static_cast<double>(distinct_lines);
            st.depth += static_cast<double>(depth);
            for (const node_ptr c : {nt::get_left(p), nt::get_right(p)}) {
                if (!c) continue;
                ++links;
                up += reinterpret_cast<std::uintptr_t>(c) > a;
                self(self, c, distinct_pages, distinct_lines, depth + 1);
            }
            pages.pop_back();
            lines.pop_back();
        };
        const node_ptr root = nt::get_parent(t.end().pointed_node());
        if (!root) return st;
        walk(walk, root, 0, 0, 1);
        st.upward = links ? static_cast<double>(up) / static_cast<double>(links) : 1.0;
        st.pages /= static_cast<double>(nodes);
        st.lines /= static_cast<double>(nodes);
        st.depth /= static_cast<double>(nodes);
        return st;
    }
};

using watched_velox = watched<velox_c>;
using watched_medius = watched<medius_c>;
} // namespace

TEMPLATE_TEST_CASE("reorganize: the map stays the map, through later inserts and erases", "[stl][reorganize]",
                   watched_velox, watched_medius) {
    TestType h;
    {
        inspected<al::hinted_map<std::uint64_t, std::uint64_t, std::less<>, TestType>> m(h);
        inspected<al::hinted_set<std::uint64_t, std::less<>, TestType>> s(h);
        std::map<std::uint64_t, std::uint64_t> ref;
        std::set<std::uint64_t> rs;
        std::mt19937_64 rng(5);
        std::vector<std::pair<void*, std::size_t>> junk;   // interleaved, so the nodes are scattered
        for (int round = 0; round < 6; ++round) {
            const int ops = round == 0 ? 1 : 4000 + round * 1500;
            for (int op = 0; op < ops; ++op) {
                const std::uint64_t k = rng() % 20000;
                switch (rng() % 5) {
                case 0:
                case 1:
                case 2:
                    m.insert_or_assign(k, k * 7 + static_cast<std::uint64_t>(op));
                    ref.insert_or_assign(k, k * 7 + static_cast<std::uint64_t>(op));
                    CHECK(s.insert(k).second == rs.insert(k).second);
                    break;
                default:
                    CHECK(m.erase(k) == ref.erase(k));
                    CHECK(s.erase(k) == rs.erase(k));
                }
                const std::size_t n = 16 + rng() % 100;
                junk.emplace_back(h.inner.allocate(al::request{n, nullptr, 0}), n);
                if (rng() % 3 == 0) {
                    std::swap(junk[rng() % junk.size()], junk.back());
                    h.inner.deallocate(junk.back().first, al::request{junk.back().second, nullptr, 0});
                    junk.pop_back();
                }
            }
            const long live_before = h.live;
            const auto before = addresses(m);
            REQUIRE(m.valid());
            m.reorganize();
            s.reorganize();
            CHECK(m.valid());
            CHECK(s.valid());
            check_same(m, ref);
            CHECK(std::equal(s.begin(), s.end(), rs.begin(), rs.end()));
            CHECK(std::equal(s.rbegin(), s.rend(), rs.rbegin(), rs.rend()));
            // In place: the same nodes, nothing allocated or freed.
            auto after = addresses(m);
            std::vector<const void*> b = before, a = after;
            std::sort(b.begin(), b.end());
            std::sort(a.begin(), a.end());
            CHECK(a == b);
            CHECK(h.live == live_before);
        }
        for (auto& [p, n] : junk) h.inner.deallocate(p, al::request{n, nullptr, 0});
    }
    CHECK(h.live == 0);
    h.inner.deallocate_all();
    CHECK(h.inner.source().bytes() == 0);
}

TEST_CASE("reorganize: empty and single-element trees are left alone", "[stl][reorganize]") {
    velox_c h;
    al::hinted_map<int, int, std::less<>, velox_c> m(h);
    m.reorganize();
    CHECK(m.empty());
    m.insert({1, 2});
    const void* a = m.begin().address();
    m.reorganize();
    CHECK(m.begin().address() == a);
    CHECK(m.at(1) == 2);
}

// The layout itself: clusters of a page's worth of levels, each in van Emde
// Boas order, in increasing addresses. Every link then points upward in
// memory (in key order, a left child sits below its parent), a path from the
// root reads about one page per cluster it crosses, and most in-order
// neighbours share a page (0.79 here; 0.83 when clusters were in key order).
TEST_CASE("reorganize: a path from the root reads a page per cluster, and every link points upward",
          "[stl][reorganize]") {
    velox_c h;
    inspected<al::hinted_map<std::uint64_t, std::uint64_t, std::less<>, velox_c>> m(h);
    std::mt19937_64 rng(9);
    std::vector<std::pair<void*, std::size_t>> junk;
    constexpr int n = 50000;
    for (int i = 0; i < n; ++i) {
        m.insert({rng(), static_cast<std::uint64_t>(i)});
        const std::size_t s = 16 + rng() % 100;
        junk.emplace_back(h.allocate(al::request{s, nullptr, 0}), s);
    }
    auto in_order_same_page = [&] {
        std::size_t same = 0;
        const void* prev = nullptr;
        for (auto it = m.begin(); it != m.end(); ++it) {
            const auto x = reinterpret_cast<std::uintptr_t>(prev), y = reinterpret_cast<std::uintptr_t>(it.address());
            same += prev && x >> 12 == y >> 12;
            prev = it.address();
        }
        return static_cast<double>(same) / (n - 1);
    };
    const auto before = m.paths();
    const double same_before = in_order_same_page();
    m.reorganize();
    REQUIRE(m.valid());
    const auto after = m.paths();
    const double same_after = in_order_same_page();
    INFO("mean depth " << after.depth << "; pages per path " << before.pages << " -> " << after.pages
                       << "; lines per path " << before.lines << " -> " << after.lines << "; links upward "
                       << before.upward << " -> " << after.upward << "; in-order neighbours in one page "
                       << same_before << " -> " << same_after);
    CHECK(after.depth == Approx(before.depth));   // the shape is kept
    CHECK(after.upward == 1.0);
    // 40-byte nodes: six levels a cluster (63 nodes), so a path of mean
    // depth d crosses about d / 6 clusters; a cluster may straddle two pages.
    CHECK(after.pages <= 2 * (after.depth / 6 + 1));
    CHECK(after.pages < before.pages / 3);
    CHECK(same_after > 0.5);
    CHECK(same_before < 0.1);
    for (auto& [p, s] : junk) h.deallocate(p, al::request{s, nullptr, 0});
}

TEST_CASE("reorganize: values that may throw when moved are copied into new nodes", "[stl][reorganize]") {
    watched_velox h;
    {
        al::hinted_map<std::string, fragile, std::less<>, watched_velox> m(h);
        std::map<std::string, std::uint64_t> ref;
        std::mt19937_64 rng(3);
        for (int i = 0; i < 3000; ++i) {
            const std::uint64_t k = rng();
            m.try_emplace(std::to_string(k), k);
            ref.emplace(std::to_string(k), k);
        }
        const auto before = addresses(m);
        const long live = fragile::live;
        const long live_blocks = h.live;
        m.reorganize();
        CHECK(fragile::live == live);
        CHECK(h.live == live_blocks);
        REQUIRE(m.size() == ref.size());
        auto it = m.begin();
        for (const auto& [k, v] : ref) {
            CHECK(it->first == k);
            CHECK(it->second.v == v);
            ++it;
        }
        // New nodes: none of the old addresses is still in use.
        const auto after = addresses(m);
        std::set<const void*> old(before.begin(), before.end());
        CHECK(std::none_of(after.begin(), after.end(), [&](const void* p) { return old.count(p) != 0; }));
        m.insert_or_assign("x", fragile(1));
        CHECK(m.at("x").v == 1);
    }
    CHECK(fragile::live == 0);
    CHECK(h.live == 0);
    h.inner.deallocate_all();
    CHECK(h.inner.source().bytes() == 0);
}

// The copying path fails half-way, by `arm`; the tree must be as it was,
// with every new node given back, and reorganize() must work afterwards.
template <class Exception, class Arm, class Disarm>
void check_failure_undone(Arm arm, Disarm disarm) {
    watched_velox h;
    {
        al::hinted_map<std::uint64_t, fragile, std::less<>, watched_velox> m(h);
        for (std::uint64_t i = 0; i < 2000; ++i) m.try_emplace(i * 31 % 2003, i);
        const auto before = addresses(m);
        const long live_blocks = h.live;
        const long live = fragile::live;
        arm(h);
        CHECK_THROWS_AS(m.reorganize(), Exception);
        disarm(h);
        CHECK(addresses(m) == before);
        CHECK(h.live == live_blocks);
        CHECK(fragile::live == live);
        for (std::uint64_t i = 0; i < 2000; ++i) CHECK(m.at(i * 31 % 2003).v == i);
        m.reorganize();
        for (std::uint64_t i = 0; i < 2000; ++i) CHECK(m.at(i * 31 % 2003).v == i);
    }
    CHECK(fragile::live == 0);
    CHECK(h.live == 0);
    h.inner.deallocate_all();
    CHECK(h.inner.source().bytes() == 0);
}

TEST_CASE("reorganize: a copy that throws or a refused node leaves the tree as it was", "[stl][reorganize]") {
    SECTION("the 1500th copy throws") {
        check_failure_undone<std::runtime_error>([](watched_velox&) { fragile::copies_left = 1500; },
                                                 [](watched_velox&) { fragile::copies_left = -1; });
    }
    SECTION("the heap refuses the 1200th node") {
        check_failure_undone<std::bad_alloc>([](watched_velox& h) { h.left = 1200; },
                                             [](watched_velox& h) { h.left = -1; });
    }
}

TEST_CASE("reorganize: values that move without throwing stay in the tree's nodes", "[stl][reorganize]") {
    STATIC_REQUIRE(std::is_nothrow_move_constructible_v<std::pair<const std::uint64_t, std::uint64_t>>);
    STATIC_REQUIRE(!std::is_nothrow_move_constructible_v<std::pair<const std::string, int>>);
    watched_velox h;
    al::hinted_set<std::uint64_t, std::less<>, watched_velox> s(h);
    std::set<std::uint64_t> ref;
    for (std::uint64_t i = 0; i < 500; ++i) {
        s.insert(i * 13 % 503);
        ref.insert(i * 13 % 503);
    }
    h.left = 0;   // the in-place path asks the heap for nothing
    s.reorganize();
    h.left = -1;
    CHECK(std::equal(s.begin(), s.end(), ref.begin(), ref.end()));
    CHECK(std::equal(s.rbegin(), s.rend(), ref.rbegin(), ref.rend()));
}

// ---------------------------------------------------------------------------
// hinted_list::reorganize(): the k-th element in the node at the k-th lowest
// address. Random inserts at random positions and erases, among unrelated
// allocations, checked against a std::vector model after every step of
// reorganisations; the nodes are the same ones, in ascending order.
// ---------------------------------------------------------------------------

TEMPLATE_TEST_CASE("reorganize: a hinted_list keeps its elements and runs upward through memory", "[stl][reorganize]",
                   watched_velox, watched_medius) {
    TestType h;
    {
        al::hinted_list<std::uint64_t, TestType> l(h);
        std::vector<std::uint64_t> model;
        std::vector<std::pair<void*, std::size_t>> junk;
        std::mt19937_64 rng(11);
        for (int round = 0; round < 6; ++round) {
            for (int i = 0; i < 700; ++i) {
                const std::uint64_t v = rng();
                if (model.empty() || rng() % 4 != 0) {
                    const std::size_t at = model.empty() ? 0 : rng() % (model.size() + 1);
                    l.insert(std::next(l.begin(), static_cast<std::ptrdiff_t>(at)), v);
                    model.insert(model.begin() + static_cast<std::ptrdiff_t>(at), v);
                } else {
                    const std::size_t at = rng() % model.size();
                    l.erase(std::next(l.begin(), static_cast<std::ptrdiff_t>(at)));
                    model.erase(model.begin() + static_cast<std::ptrdiff_t>(at));
                }
                const std::size_t s = 16 + rng() % 113;
                junk.emplace_back(h.allocate(al::request{s}), s);
            }
            auto before = addresses(l);
            const long live_blocks = h.live;
            h.left = 0;   // the in-place path asks the heap for nothing
            l.reorganize();
            h.left = -1;
            CHECK(h.live == live_blocks);
            REQUIRE(l.size() == model.size());
            CHECK(std::equal(l.begin(), l.end(), model.begin(), model.end()));
            CHECK(std::equal(l.rbegin(), l.rend(), model.rbegin(), model.rend()));
            const auto after = addresses(l);
            CHECK(std::is_sorted(after.begin(), after.end(), std::less<>{}));
            CHECK(std::adjacent_find(after.begin(), after.end()) == after.end());
            std::sort(before.begin(), before.end(), std::less<>{});
            CHECK(after == before);   // the same nodes
        }
        // The links stay usable: more inserts and erases at both ends.
        l.push_front(1);
        l.push_back(2);
        l.pop_front();
        model.push_back(2);
        CHECK(std::equal(l.begin(), l.end(), model.begin(), model.end()));
        for (auto& [p, s] : junk) h.deallocate(p, al::request{s});
    }
    CHECK(h.live == 0);
    h.inner.deallocate_all();
    CHECK(h.inner.source().bytes() == 0);
}

TEST_CASE("reorganize: an empty or one-element hinted_list is left alone", "[stl][reorganize]") {
    watched_velox h;
    al::hinted_list<std::uint64_t, watched_velox> l(h);
    h.left = 0;
    l.reorganize();
    CHECK(l.empty());
    h.left = -1;
    l.push_back(7);
    const void* only = l.begin().address();
    h.left = 0;
    l.reorganize();
    h.left = -1;
    REQUIRE(l.size() == 1);
    CHECK(l.front() == 7);
    CHECK(l.begin().address() == only);
}

TEST_CASE("reorganize: a hinted_list of values that may throw when moved is copied, or left as it was",
          "[stl][reorganize]") {
    watched_velox h;
    {
        al::hinted_list<fragile, watched_velox> l(h);
        std::vector<std::uint64_t> model;
        std::mt19937_64 rng(5);
        for (int i = 0; i < 2000; ++i) {
            const std::uint64_t v = rng();
            const std::size_t at = model.empty() ? 0 : rng() % (model.size() + 1);
            l.insert(std::next(l.begin(), static_cast<std::ptrdiff_t>(at)), fragile(v));
            model.insert(model.begin() + static_cast<std::ptrdiff_t>(at), v);
        }
        auto same = [&] {
            return l.size() == model.size() &&
                   std::equal(l.begin(), l.end(), model.begin(), [](const fragile& f, std::uint64_t v) { return f.v == v; });
        };
        const auto before = addresses(l);
        const long live_blocks = h.live;
        const long live = fragile::live;

        fragile::copies_left = 1500;
        CHECK_THROWS_AS(l.reorganize(), std::runtime_error);
        fragile::copies_left = -1;
        CHECK(addresses(l) == before);
        CHECK(same());
        CHECK(h.live == live_blocks);
        CHECK(fragile::live == live);

        h.left = 1200;
        CHECK_THROWS_AS(l.reorganize(), std::bad_alloc);
        h.left = -1;
        CHECK(addresses(l) == before);
        CHECK(same());
        CHECK(h.live == live_blocks);
        CHECK(fragile::live == live);

        l.reorganize();
        CHECK(same());
        CHECK(h.live == live_blocks);
        CHECK(fragile::live == live);
        const auto after = addresses(l);
        std::set<const void*> old(before.begin(), before.end());
        CHECK(std::none_of(after.begin(), after.end(), [&](const void* p) { return old.count(p) != 0; }));
    }
    CHECK(fragile::live == 0);
    CHECK(h.live == 0);
    h.inner.deallocate_all();
    CHECK(h.inner.source().bytes() == 0);
}
