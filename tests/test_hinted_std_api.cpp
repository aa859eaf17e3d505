// The std members of hinted_map / hinted_set / hinted_list that users
// replacing std::map / std::set / std::list rely on: emplace, emplace_hint,
// try_emplace and insert_or_assign with a hint, equal_range, node handles,
// merge, erase_if; sort, splice, merge, remove_if, unique, reverse, resize,
// insert of several elements, assign. Each is run in random sequences against
// the std container, the contents compared after every step, and every node
// these members create is checked to have been asked for next to the
// neighbour that the container's hint rule names.
#include "catch.hpp"

#include <algorithm>
#include <cstddef>
#include <functional>
#include <iterator>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <allotheque/allocators/velox.hpp>
#include <allotheque/sources/counting_source.hpp>
#include <allotheque/sources/malloc_source.hpp>
#include <allotheque/stl/hinted_list.hpp>
#include <allotheque/stl/hinted_map.hpp>
#include <allotheque/stl/hinted_set.hpp>

namespace al = allotheque;

namespace {
// A heap over operator new that records the hint of every allocation and
// counts live nodes, so a test sees both where nodes were asked for and that
// every node went back to the heap it came from.
struct recording_heap {
    static constexpr std::size_t max_alignment = alignof(std::max_align_t);
    std::vector<const void*> hints;
    long live = 0;
    void* allocate(const al::request& r) {
        hints.push_back(r.hint);
        ++live;
        return ::operator new(r.size);
    }
    void deallocate(void* p, const al::request&) noexcept {
        --live;
        ::operator delete(p);
    }
};

// The hint a tree's policy gives a node at `it` (already linked there, and a
// leaf when it was linked: its parent is one of its in-order neighbours).
template <class Policy, class C>
bool hint_is_policys(const C& c, typename C::const_iterator it, const void* hint) {
    const void* pred = it == c.begin() ? nullptr : std::prev(it).address();
    const void* succ = std::next(it) == c.end() ? nullptr : std::next(it).address();
    if constexpr (std::is_same_v<Policy, al::tree_hint::predecessor>) return hint == (pred ? pred : succ);
    else if constexpr (std::is_same_v<Policy, al::tree_hint::successor>) return hint == (succ ? succ : pred);
    else return (hint && (hint == pred || hint == succ)) || (!pred && !succ && !hint);
}

// Checks after a step that may have created a node at `it`: one allocation
// exactly when `created`, hinted as the policy says.
template <class Policy, class C>
void check_new_node(const C& c, recording_heap& h, std::size_t hints_before, bool created,
                    typename C::const_iterator it) {
    REQUIRE(h.hints.size() == hints_before + (created ? 1 : 0));
    if (created) CHECK(hint_is_policys<Policy>(c, it, h.hints.back()));
}

template <class M, class R>
bool same_map(const M& m, const R& ref) {
    return m.size() == ref.size() &&
           std::equal(m.begin(), m.end(), ref.begin(), ref.end(),
                      [](const auto& a, const auto& b) { return a.first == b.first && a.second == b.second; });
}
template <class S, class R>
bool same_seq(const S& s, const R& ref) {
    return s.size() == ref.size() && std::equal(s.begin(), s.end(), ref.begin(), ref.end()) &&
           std::equal(s.crbegin(), s.crend(), ref.rbegin(), ref.rend());
}
} // namespace

TEMPLATE_TEST_CASE("hinted_map: emplace, emplace_hint, equal_range, node handles, merge, erase_if as std::map",
                   "[stl][hinted_tree][std_api]", al::tree_hint::parent, al::tree_hint::predecessor,
                   al::tree_hint::successor) {
    using map = al::hinted_map<int, std::string, std::less<int>, recording_heap, TestType>;
    recording_heap h, other_heap;
    {
        map m(h), same(h), other(other_heap);   // `same` shares m's heap, `other` does not
        std::map<int, std::string> rm, rsame, rother;
        std::vector<typename map::node_type> held;   // handles kept across steps
        std::vector<std::optional<std::pair<int, std::string>>> rheld;
        std::mt19937 rng(29);
        auto key = [&] { return static_cast<int>(rng() % 400); };
        for (int op = 0; op < 6000; ++op) {
            const std::size_t before = h.hints.size();
            const int k = key();
            const std::string v = std::to_string(op);
            switch (rng() % 15) {
            case 0: {   // emplace(key, mapped): the key read from the arguments
                auto [it, fresh] = m.emplace(k, v);
                auto [rit, rfresh] = rm.emplace(k, v);
                REQUIRE(fresh == rfresh);
                CHECK(it->second == rit->second);
                check_new_node<TestType>(m, h, before, fresh, it);
                break;
            }
            case 1: {   // emplace(piecewise): the same
                auto [it, fresh] = m.emplace(std::piecewise_construct, std::forward_as_tuple(k),
                                             std::forward_as_tuple(3, 'p'));
                REQUIRE(fresh == rm.emplace(std::piecewise_construct, std::forward_as_tuple(k),
                                            std::forward_as_tuple(3, 'p'))
                                     .second);
                check_new_node<TestType>(m, h, before, fresh, it);
                break;
            }
            case 2: {   // emplace(pair of other types): the value built first
                auto [it, fresh] = m.emplace(std::pair<long, const char*>(k, "conv"));
                REQUIRE(fresh == rm.emplace(std::pair<long, const char*>(k, "conv")).second);
                check_new_node<TestType>(m, h, before, fresh, it);
                break;
            }
            case 3: {   // emplace_hint / insert(hint, v): right, wrong and end() hints
                const int where = static_cast<int>(rng() % 3);
                auto hint = where == 0 ? m.lower_bound(k) : where == 1 ? m.begin() : m.end();
                auto rhint = where == 0 ? rm.lower_bound(k) : where == 1 ? rm.begin() : rm.end();
                const bool fresh = !rm.contains(k);
                auto it = (op & 1) ? m.emplace_hint(hint, k, v) : m.insert(hint, {k, v});
                auto rit = (op & 1) ? rm.emplace_hint(rhint, k, v) : rm.insert(rhint, {k, v});
                CHECK(it->first == rit->first);
                CHECK(it->second == rit->second);
                check_new_node<TestType>(m, h, before, fresh, it);
                break;
            }
            case 4: {   // try_emplace with a hint
                const bool fresh = !rm.contains(k);
                auto it = m.try_emplace(m.upper_bound(k), k, v);
                rm.try_emplace(rm.upper_bound(k), k, v);
                CHECK(it->first == k);
                check_new_node<TestType>(m, h, before, fresh, it);
                break;
            }
            case 5: {   // equal_range, const and not
                auto [lo, hi] = m.equal_range(k);
                auto [rlo, rhi] = rm.equal_range(k);
                CHECK(std::distance(lo, hi) == std::distance(rlo, rhi));
                CHECK((lo == m.end()) == (rlo == rm.end()));
                if (lo != m.end()) CHECK(lo->first == rlo->first);
                const map& cm = m;
                auto [clo, chi] = cm.equal_range(k);
                CHECK(clo == typename map::const_iterator(lo));
                CHECK(chi == typename map::const_iterator(hi));
                break;
            }
            case 6: {   // extract by key or position, kept for later
                if (held.size() > 8) break;
                if (rng() % 2 == 0 || rm.empty()) {
                    held.push_back(m.extract(k));
                    auto rn = rm.extract(k);
                    rheld.push_back(rn ? std::optional(std::pair(rn.key(), rn.mapped())) : std::nullopt);
                } else {
                    const auto at = static_cast<long>(rng() % rm.size());
                    held.push_back(m.extract(std::next(m.begin(), at)));
                    auto rn = rm.extract(std::next(rm.begin(), at));
                    rheld.push_back(std::pair(rn.key(), rn.mapped()));
                }
                REQUIRE(held.back().empty() == !rheld.back());
                if (rheld.back()) {
                    CHECK(held.back().key() == rheld.back()->first);
                    CHECK(held.back().mapped() == rheld.back()->second);
                }
                break;
            }
            case 7: {   // a held handle, its key and value changed or not, goes back in (or is dropped)
                if (held.empty()) break;
                const std::size_t i = rng() % held.size();
                auto nh = std::move(held[i]);
                auto rn = rheld[i];
                held.erase(held.begin() + static_cast<long>(i));
                rheld.erase(rheld.begin() + static_cast<long>(i));
                if (!nh || rng() % 4 == 0) break;   // dropped: the node goes back to the heap
                if (rng() % 2) {
                    nh.key() = k;
                    nh.mapped() += "'";
                    rn->first = k;
                    rn->second += "'";
                }
                const std::string* value = &nh.mapped();
                const bool fresh = rm.insert(*rn).second;
                if (rng() % 2) {
                    auto r = m.insert(std::move(nh));
                    REQUIRE(r.inserted == fresh);
                    CHECK(r.position->first == rn->first);
                    CHECK(r.node.empty() == fresh);   // a refused handle comes back
                    if (fresh) CHECK(&r.position->second == value);   // relinked, not copied
                } else {
                    auto it = m.insert(m.lower_bound(rn->first), std::move(nh));
                    CHECK(it->first == rn->first);
                    CHECK(nh.empty() == fresh);   // a refused handle is left as it was
                    if (fresh) CHECK(&it->second == value);
                }
                CHECK(h.hints.size() == before);   // a node of this heap: nothing allocated
                break;
            }
            case 8: {   // fill the other maps
                same.try_emplace(k, "s" + v);
                rsame.try_emplace(k, "s" + v);
                const int k2 = key();
                other.try_emplace(k2, "o" + v);
                rother.try_emplace(k2, "o" + v);
                break;
            }
            case 9: {   // merge from a map on the same heap: relinked, nothing allocated
                if (rng() % 4) break;
                m.merge(same);
                rm.merge(rsame);
                CHECK(h.hints.size() == before);
                break;
            }
            case 10: {   // merge from a map on another heap: a new node here, hinted, per element taken
                if (rng() % 4) break;
                const std::size_t moving = static_cast<std::size_t>(std::count_if(
                    rother.begin(), rother.end(), [&](const auto& e) { return !rm.contains(e.first); }));
                const long other_live = other_heap.live;
                const bool was_empty = m.empty();
                m.merge(std::move(other));
                rm.merge(rother);
                REQUIRE(h.hints.size() == before + moving);
                CHECK(other_heap.live == other_live - static_cast<long>(moving));
                // Each new node was hinted next to a neighbour (the first into an empty map has none).
                for (std::size_t j = before + (was_empty ? 1 : 0); j < h.hints.size(); ++j) CHECK(h.hints[j]);
                break;
            }
            case 11: {   // a handle from the map on the other heap
                if (other.lower_bound(k) == other.end()) break;
                auto nh = other.extract(other.lower_bound(k));
                rother.erase(nh.key());
                const bool fresh = rm.insert({nh.key(), nh.mapped()}).second;
                auto r = m.insert(std::move(nh));
                REQUIRE(r.inserted == fresh);
                check_new_node<TestType>(m, h, before, fresh, r.position);
                break;
            }
            case 12: {   // erase_if, found by argument-dependent lookup beside std::erase_if
                using std::erase_if;
                const int mod = 7 + static_cast<int>(rng() % 20);
                auto odd = [mod](const auto& e) { return e.first % mod == 0; };
                CHECK(erase_if(m, odd) == erase_if(rm, odd));
                break;
            }
            case 13: {   // insert_or_assign and try_emplace, key moved or not, with a hint or not
                const bool fresh = !rm.contains(k);
                const unsigned form = rng() % 6;
                int moved_key = k;
                typename map::iterator it;
                if (form == 0) it = m.insert_or_assign(k, v).first;
                else if (form == 1) it = m.insert_or_assign(std::move(moved_key), v).first;
                else if (form == 2) it = m.insert_or_assign(m.lower_bound(k), k, v);
                else if (form == 3) it = m.insert_or_assign(m.end(), std::move(moved_key), v);
                else if (form == 4) it = m.try_emplace(std::move(moved_key), 2, 't').first;
                else it = m.try_emplace(m.begin(), std::move(moved_key), 2, 'u');
                if (form < 4) rm.insert_or_assign(k, v);
                else rm.try_emplace(k, 2, form == 4 ? 't' : 'u');
                CHECK(it->first == k);
                check_new_node<TestType>(m, h, before, fresh, it);
                break;
            }
            default: {   // range erase
                auto lo = m.lower_bound(k), hi = m.upper_bound(k + 10);
                auto rit = rm.erase(rm.lower_bound(k), rm.upper_bound(k + 10));
                auto it = m.erase(lo, hi);
                CHECK((it == m.end()) == (rit == rm.end()));
                if (it != m.end()) CHECK(it->first == rit->first);
            }
            }
            REQUIRE(same_map(m, rm));
            REQUIRE(same_map(same, rsame));
            REQUIRE(same_map(other, rother));
        }
        CHECK(m.get_allocator() == al::allocator<std::pair<const int, std::string>, recording_heap, al::no_hint>(h));
        CHECK(m.max_size() >= std::size_t{1} << 40);
        CHECK(h.live == static_cast<long>(m.size() + same.size() + std::count_if(held.begin(), held.end(), [](auto& n) {
                                              return !n.empty();
                                          })));
    }
    CHECK(h.live == 0);
    CHECK(other_heap.live == 0);
}

TEMPLATE_TEST_CASE("hinted_set: emplace, emplace_hint, equal_range, node handles, merge, erase_if as std::set",
                   "[stl][hinted_tree][std_api]", al::tree_hint::parent, al::tree_hint::predecessor,
                   al::tree_hint::successor) {
    using set = al::hinted_set<std::string, std::less<std::string>, recording_heap, TestType>;
    recording_heap h, other_heap;
    {
        set s(h), other(other_heap);
        std::set<std::string> rs, rother;
        std::mt19937 rng(31);
        auto key = [&] { return std::to_string(rng() % 500); };
        for (int op = 0; op < 5000; ++op) {
            const std::size_t before = h.hints.size();
            const std::string k = key();
            switch (rng() % 9) {
            case 0: {   // emplace(key): read as it is; emplace(chars): built first
                auto [it, fresh] = (op & 1) ? s.emplace(k) : s.emplace(k.c_str(), k.size());
                REQUIRE(fresh == rs.emplace(k).second);
                CHECK(*it == k);
                check_new_node<TestType>(s, h, before, fresh, it);
                break;
            }
            case 1: {
                const bool fresh = !rs.contains(k);
                auto it = (op & 1) ? s.emplace_hint(s.lower_bound(k), k) : s.insert(s.end(), k);
                rs.insert(k);
                CHECK(*it == k);
                check_new_node<TestType>(s, h, before, fresh, it);
                break;
            }
            case 2: {
                auto [lo, hi] = s.equal_range(k);
                auto [rlo, rhi] = rs.equal_range(k);
                CHECK(std::distance(lo, hi) == std::distance(rlo, rhi));
                CHECK((hi == s.end()) == (rhi == rs.end()));
                if (hi != s.end()) CHECK(*hi == *rhi);
                break;
            }
            case 3: {   // extract, change the value, insert again (unless taken)
                auto nh = s.extract(k);
                auto rn = rs.extract(k);
                REQUIRE(nh.empty() == rn.empty());
                if (!nh) break;
                CHECK(nh.value() == rn.value());
                nh.value() = key();
                rn.value() = nh.value();
                auto r = s.insert(std::move(nh));
                auto rr = rs.insert(std::move(rn));
                REQUIRE(r.inserted == rr.inserted);
                CHECK(*r.position == *rr.position);
                CHECK(r.node.empty() == rr.node.empty());
                CHECK(h.hints.size() == before);
                break;
            }
            case 4:
                other.insert(k);
                rother.insert(k);
                break;
            case 5: {   // merge from the other heap: each node taken is a new, hinted one here
                if (rng() % 4) break;
                const bool was_empty = s.empty();
                s.merge(other);
                rs.merge(rother);
                for (std::size_t j = before + (was_empty ? 1 : 0); j < h.hints.size(); ++j) CHECK(h.hints[j]);
                break;
            }
            case 6: {   // a handle from the other heap: moved into a new, hinted node here
                if (other.lower_bound(k) == other.end()) break;
                auto nh = other.extract(other.lower_bound(k));
                rother.erase(nh.value());
                const bool fresh = rs.insert(nh.value()).second;
                auto it = s.insert(s.end(), std::move(nh));
                check_new_node<TestType>(s, h, before, fresh, it);
                break;
            }
            case 7: {
                const char last = k.back();
                auto pred = [last](const std::string& e) { return e.back() == last; };
                CHECK(erase_if(s, pred) == std::erase_if(rs, pred));
                break;
            }
            default:
                CHECK(s.erase(k) == rs.erase(k));
            }
            REQUIRE(same_seq(s, rs));
            REQUIRE(same_seq(other, rother));
        }
        s.insert({"a", "b", "c"});
        CHECK(s.contains("b"));
        const std::vector<std::string> more{"x1", "x2"};
        s.insert(more.begin(), more.end());
        CHECK(s.contains("x2"));
        CHECK_FALSE(s.get_allocator() == other.get_allocator());
    }
    CHECK(h.live == 0);
    CHECK(other_heap.live == 0);
}

TEST_CASE("hinted_map: node handles on their own", "[stl][hinted_tree][std_api]") {
    using map = al::hinted_map<int, std::string, std::less<int>, recording_heap>;
    recording_heap h;
    {
        map m(h, {{1, "one"}, {2, "two"}, {3, "three"}});
        map::node_type empty;
        CHECK(empty.empty());
        CHECK_FALSE(empty);
        auto r = m.insert(std::move(empty));
        CHECK_FALSE(r.inserted);
        CHECK(r.position == m.end());
        CHECK(m.extract(9).empty());

        auto nh = m.extract(2);
        CHECK(m.size() == 2);
        CHECK(h.live == 3);   // the node lives in the handle
        CHECK(nh.get_allocator() == m.get_allocator());
        map::node_type moved(std::move(nh));
        CHECK(nh.empty());
        nh = std::move(moved);
        nh.key() = 1;   // taken: comes back in the result
        auto refused = m.insert(std::move(nh));
        CHECK_FALSE(refused.inserted);
        CHECK(refused.position->second == "one");
        CHECK(refused.node.key() == 1);
        refused.node.key() = 7;
        CHECK(m.insert(std::move(refused.node)).inserted);
        CHECK(m.at(7) == "two");
        auto dropped = m.extract(m.begin());
        dropped = map::node_type();   // assigning frees the node
        CHECK(h.live == 2);
        CHECK(m.emplace(5, "five").second);
        CHECK_FALSE(m.emplace(5, "cinq").second);
        CHECK(m.at(5) == "five");
    }
    CHECK(h.live == 0);
}

TEST_CASE("hinted_map: node handles of a value that cannot move, between maps on one heap",
          "[stl][hinted_tree][std_api]") {
    // Relinked, as in std: only a move to another heap needs the value to move.
    recording_heap h;
    {
        al::hinted_map<int, std::mutex, std::less<>, recording_heap> a(h), b(h);
        a.try_emplace(1);
        a.try_emplace(2);
        const std::mutex* first = &a.at(1);
        CHECK(b.insert(a.extract(1)).inserted);
        CHECK(&b.at(1) == first);
        b.merge(a);
        CHECK(a.empty());
        CHECK(b.size() == 2);
        CHECK(h.hints.size() == 2);
    }
    CHECK(h.live == 0);
}

TEST_CASE("hinted_set / hinted_map: node handles and merge across real heaps", "[stl][hinted_tree][std_api]") {
    using counted = al::counting_source<al::malloc_source>;
    using heap = al::velox_heap<counted>;
    heap h1, h2;
    {
        al::hinted_map<int, std::string, std::less<int>, heap> a(h1), b(h2);
        for (int i = 0; i < 2000; ++i) {
            a.emplace(2 * i, std::string(30, 'a'));
            b.emplace(3 * i, std::string(30, 'b'));
        }
        a.merge(b);   // the keys not in a move to h1
        CHECK(a.size() == 2000 + 1333);
        CHECK(b.size() == 667);
        for (auto& [k, v] : b) CHECK(k % 2 == 0);
        al::hinted_set<int, std::less<int>, heap> s(h2, {1, 2, 3}), t(h1);
        t.insert(s.extract(2));
        CHECK((t == al::hinted_set<int, std::less<int>, heap>(h1, {2})));
    }
    h1.deallocate_all();
    h2.deallocate_all();
    CHECK(h1.source().bytes() == 0);
    CHECK(h2.source().bytes() == 0);
}

namespace {
// A list element: a key to sort and compare by, and its serial number, which
// tells equal keys apart and so shows whether an operation was stable.
struct item {
    int key;
    int serial;
    bool operator==(const item&) const = default;
};
bool by_key(const item& a, const item& b) { return a.key < b.key; }
bool same_key(const item& a, const item& b) { return a.key == b.key; }

// The addresses the nodes of [first, first + n) must have been asked for next
// to, when they were inserted in that order before the element now at first + n:
// each one's predecessor; for a new first element, that element after the run
// (none in a list that was empty).
template <class L>
std::vector<const void*> predecessor_hints(const L& l, std::size_t first, std::size_t n) {
    std::vector<const void*> want;
    auto it = std::next(l.begin(), static_cast<long>(first));
    const auto after = std::next(it, static_cast<long>(n));
    for (std::size_t i = 0; i < n; ++i, ++it) {
        if (it != l.begin()) want.push_back(std::prev(it).address());
        else want.push_back(after != l.end() ? after.address() : nullptr);
    }
    return want;
}
} // namespace

TEST_CASE("hinted_list: sort, splice, merge, remove_if, unique, reverse, resize as std::list",
          "[stl][hinted_list][std_api]") {
    using list = al::hinted_list<item, recording_heap>;
    recording_heap h, other_heap;
    {
        list l(h), same(h), other(other_heap);
        std::list<item> rl, rsame, rother;
        std::mt19937 rng(37);
        int serial = 0;
        auto fill = [&](list& x, std::list<item>& rx, int n) {
            for (int i = 0; i < n; ++i) {
                const item v{static_cast<int>(rng() % 50), serial++};
                x.push_back(v);
                rx.push_back(v);
            }
        };
        auto pos = [&](const auto& c) { return static_cast<long>(c.empty() ? 0 : rng() % (c.size() + 1)); };
        for (int op = 0; op < 4000; ++op) {
            const std::size_t before = h.hints.size();
            const unsigned what = rng() % 14;
            INFO("step " << op << ", operation " << what);
            switch (what) {
            case 0:
                fill(l, rl, static_cast<int>(rng() % 20));
                fill(same, rsame, static_cast<int>(rng() % 10));
                fill(other, rother, static_cast<int>(rng() % 10));
                break;
            case 1:   // stable: equal keys keep their order
                if (rng() % 2) {
                    l.sort(by_key);
                    rl.sort(by_key);
                } else {
                    l.sort([](const item& a, const item& b) { return a.key > b.key; });
                    rl.sort([](const item& a, const item& b) { return a.key > b.key; });
                }
                CHECK(h.hints.size() == before);
                break;
            case 2: {   // splice a whole list (same heap: relinked; other heap: new hinted nodes)
                const bool from_same = rng() % 2;
                list& src = from_same ? same : other;
                std::list<item>& rsrc = from_same ? rsame : rother;
                const long at = pos(rl);
                const std::size_t n = rsrc.size();
                l.splice(std::next(l.begin(), at), src);
                rl.splice(std::next(rl.begin(), at), rsrc);
                REQUIRE(h.hints.size() == before + (from_same ? 0 : n));
                if (!from_same) {
                    const std::vector<const void*> got(h.hints.begin() + static_cast<long>(before), h.hints.end());
                    CHECK(got == predecessor_hints(l, static_cast<std::size_t>(at), n));
                }
                break;
            }
            case 3: {   // splice one element, from another list or within this one
                const bool within = rng() % 2;
                list& src = within ? l : same;
                std::list<item>& rsrc = within ? rl : rsame;
                if (rsrc.empty()) break;
                const long from = static_cast<long>(rng() % rsrc.size());
                const long at = pos(rl);
                l.splice(std::next(l.begin(), at), src, std::next(src.begin(), from));
                rl.splice(std::next(rl.begin(), at), rsrc, std::next(rsrc.begin(), from));
                CHECK(h.hints.size() == before);
                break;
            }
            case 4: {   // splice a range, from another list or (outside the range) within this one
                const bool within = rng() % 2;
                list& src = within ? l : same;
                std::list<item>& rsrc = within ? rl : rsame;
                long a = pos(rsrc), b = pos(rsrc);
                if (a > b) std::swap(a, b);
                long at = pos(rl);
                if (within && at >= a && at < b) at = b;   // not inside [a, b)
                l.splice(std::next(l.begin(), at), src, std::next(src.begin(), a), std::next(src.begin(), b));
                rl.splice(std::next(rl.begin(), at), rsrc, std::next(rsrc.begin(), a), std::next(rsrc.begin(), b));
                CHECK(h.hints.size() == before);
                break;
            }
            case 5: {   // remove_if / erase_if / remove (with a value that is in the list)
                const int mod = 2 + static_cast<int>(rng() % 9);
                auto pred = [mod](const item& x) { return x.key % mod == 0; };
                const int which = static_cast<int>(rng() % 4);
                using std::erase, std::erase_if;
                if (which == 0) CHECK(l.remove_if(pred) == rl.remove_if(pred));
                else if (which == 1) CHECK(erase_if(l, pred) == erase_if(rl, pred));
                else if (rl.empty()) break;
                else if (which == 2) CHECK(l.remove(l.front()) == rl.remove(item(rl.front())));
                else CHECK(erase(l, l.back()) == erase(rl, item(rl.back())));
                break;
            }
            case 6:   // unique by key, then exactly
                if (rng() % 2) CHECK(l.unique(same_key) == rl.unique(same_key));
                else CHECK(l.unique() == rl.unique());
                break;
            case 7:
                l.reverse();
                rl.reverse();
                break;
            case 8: {   // merge sorted lists, stably; from the same heap or another
                const bool from_same = rng() % 2;
                list& src = from_same ? same : other;
                std::list<item>& rsrc = from_same ? rsame : rother;
                l.sort(by_key);
                rl.sort(by_key);
                src.sort(by_key);
                rsrc.sort(by_key);
                const std::size_t n = rsrc.size();
                const bool was_empty = l.empty();
                if (rng() % 2) {
                    l.merge(src, by_key);
                    rl.merge(rsrc, by_key);
                } else {
                    l.merge(std::move(src), by_key);
                    rl.merge(std::move(rsrc), by_key);
                }
                CHECK(h.hints.size() == before + (from_same ? 0 : n));
                for (std::size_t j = before + (was_empty ? 1 : 0); j < h.hints.size(); ++j) CHECK(h.hints[j]);
                break;
            }
            case 9: {   // resize: growth hinted next to each new node's predecessor
                const std::size_t old = rl.size();
                const std::size_t n = rng() % 60;
                const item v{-1, serial++};
                if (rng() % 2) {
                    l.resize(n, v);
                    rl.resize(n, v);
                } else {
                    l.resize(n);
                    rl.resize(n);
                }
                const std::size_t grown = n > old ? n - old : 0;
                REQUIRE(h.hints.size() == before + grown);
                const std::vector<const void*> got(h.hints.begin() + static_cast<long>(before), h.hints.end());
                CHECK(got == predecessor_hints(l, old, grown));
                break;
            }
            case 10:   // merge with itself, splice of nothing: no effect
                l.merge(l, by_key);
                l.splice(l.begin(), same, same.begin(), same.begin());
                break;
            case 11: {   // several elements inserted at once: each hinted next to its predecessor
                const long at = pos(rl);
                const std::size_t n = rng() % 6;
                std::vector<item> src;
                for (std::size_t i = 0; i < n; ++i) src.push_back({static_cast<int>(rng() % 50), serial++});
                const unsigned form = rng() % 3;
                typename list::iterator first;
                if (form == 0) {
                    first = l.insert(std::next(l.begin(), at), src.begin(), src.end());
                    rl.insert(std::next(rl.begin(), at), src.begin(), src.end());
                } else if (form == 1) {
                    const item v{-2, serial++};
                    src.assign(n, v);
                    first = l.insert(std::next(l.begin(), at), n, v);
                    rl.insert(std::next(rl.begin(), at), n, v);
                } else {
                    const item a{-3, serial++}, b{-4, serial++};
                    src = {a, b};
                    first = l.insert(std::next(l.begin(), at), {a, b});
                    rl.insert(std::next(rl.begin(), at), {a, b});
                }
                CHECK(std::distance(l.begin(), first) == at);
                REQUIRE(h.hints.size() == before + src.size());
                const std::vector<const void*> got(h.hints.begin() + static_cast<long>(before), h.hints.end());
                CHECK(got == predecessor_hints(l, static_cast<std::size_t>(at), src.size()));
                break;
            }
            case 12: {   // assign: the elements there keep their nodes, growth is hinted at the back
                const std::size_t old = rl.size();
                const std::size_t n = rng() % 40;
                const unsigned form = rng() % 4;
                if (form == 0) {
                    std::vector<item> src;
                    for (std::size_t i = 0; i < n; ++i) src.push_back({static_cast<int>(rng() % 50), serial++});
                    l.assign(src.begin(), src.end());
                    rl.assign(src.begin(), src.end());
                } else if (form == 1) {
                    const item v{-5, serial++};
                    l.assign(n, v);
                    rl.assign(n, v);
                } else {
                    const item a{-6, serial++}, b{-7, serial++}, c{-8, serial++};
                    if (form == 2) l.assign({a, b, c});
                    else l = {a, b, c};
                    rl.assign({a, b, c});
                }
                const std::size_t grown = rl.size() > old ? rl.size() - old : 0;
                REQUIRE(h.hints.size() == before + grown);
                const std::vector<const void*> got(h.hints.begin() + static_cast<long>(before), h.hints.end());
                CHECK(got == predecessor_hints(l, old, grown));
                break;
            }
            default:
                if (!rl.empty()) {
                    l.pop_front();
                    rl.pop_front();
                }
            }
            REQUIRE(same_seq(l, rl));
            REQUIRE(same_seq(same, rsame));
            REQUIRE(same_seq(other, rother));
        }
        CHECK(l.get_allocator() == same.get_allocator());
        CHECK(l.max_size() >= std::size_t{1} << 40);
        CHECK(h.live == static_cast<long>(l.size() + same.size()));
        CHECK(other_heap.live == static_cast<long>(other.size()));
    }
    CHECK(h.live == 0);
    CHECK(other_heap.live == 0);
}

TEST_CASE("hinted_list: a throwing comparison leaves every element in place", "[stl][hinted_list][std_api]") {
    recording_heap h;
    al::hinted_list<int, recording_heap> l(h), o(h);
    std::multiset<int> all;
    std::mt19937 rng(41);
    for (int i = 0; i < 500; ++i) {
        const int v = static_cast<int>(rng() % 100);
        (i % 3 ? l : o).push_back(v);
        all.insert(v);
    }
    // Sorting 333 elements takes well over 100 comparisons, merging 20 into them over 7.
    for (int limit : {0, 1, 7, 100}) {
        int calls = 0;
        auto flaky = [&](int a, int b) {
            if (++calls > limit) throw std::runtime_error("comparison");
            return a < b;
        };
        CHECK_THROWS_AS(l.sort(flaky), std::runtime_error);
        if (limit < 20) {
            for (int i = 0; i < 20; ++i) {
                o.push_back(i);
                all.insert(i);
            }
            calls = 0;
            CHECK_THROWS_AS(l.merge(o, flaky), std::runtime_error);
        }
        std::multiset<int> seen(l.begin(), l.end());
        seen.insert(o.begin(), o.end());
        CHECK(seen == all);
        CHECK(static_cast<std::size_t>(std::distance(l.begin(), l.end())) == l.size());
        CHECK(static_cast<std::size_t>(std::distance(l.rbegin(), l.rend())) == l.size());
        CHECK(static_cast<std::size_t>(std::distance(o.begin(), o.end())) == o.size());
    }
    l.sort();
    o.sort();
    l.merge(o);
    CHECK(std::is_sorted(l.begin(), l.end()));
    CHECK(l.size() == all.size());
    CHECK(std::equal(l.begin(), l.end(), all.begin(), all.end()));
}

namespace {
// Default construction and copies fail once `budget` runs out.
struct fussy {
    static inline int budget = 0;
    int v = 0;
    fussy() { spend(); }
    explicit fussy(int x) : v(x) {}
    fussy(const fussy& o) : v(o.v) { spend(); }
    fussy& operator=(const fussy&) = default;
    static void spend() {
        if (--budget < 0) throw std::runtime_error("no more");
    }
};
} // namespace

TEST_CASE("hinted_list: resize keeps the list as it was when an element throws", "[stl][hinted_list][std_api]") {
    recording_heap h;
    al::hinted_list<fussy, recording_heap> l(h);
    for (int i = 0; i < 5; ++i) l.emplace_back(i);
    fussy::budget = 3;
    CHECK_THROWS_AS(l.resize(10), std::runtime_error);
    CHECK(l.size() == 5);
    CHECK(h.live == 5);
    CHECK(l.back().v == 4);
    fussy::budget = 5;
    l.resize(10);
    CHECK(l.size() == 10);
    l.resize(2);
    CHECK(l.size() == 2);
    CHECK(h.live == 2);
}

TEST_CASE("hinted_list: inserting several elements is all or nothing", "[stl][hinted_list][std_api]") {
    recording_heap h;
    al::hinted_list<fussy, recording_heap> l(h);
    for (int i = 0; i < 5; ++i) l.emplace_back(i);
    fussy::budget = 100;
    std::vector<fussy> src;
    for (int i = 0; i < 4; ++i) src.emplace_back(10 + i);
    auto unchanged = [&] {
        CHECK(l.size() == 5);
        CHECK(h.live == 5);
        int i = 0;
        for (const fussy& x : l) CHECK(x.v == i++);
    };
    fussy::budget = 2;
    CHECK_THROWS_AS(l.insert(std::next(l.begin(), 2), src.begin(), src.end()), std::runtime_error);
    unchanged();
    fussy::budget = 3;
    CHECK_THROWS_AS(l.insert(l.begin(), 4, src.front()), std::runtime_error);
    unchanged();
    fussy::budget = 4;
    auto it = l.insert(l.end(), src.begin(), src.end());
    CHECK(it->v == 10);
    CHECK(l.size() == 9);
}
