// allotheque::allocator with the standard containers, its allocator_traits
// properties, hint and alignment plumbing, bad sizes; memory_resource with
// std::pmr containers.
#include "catch.hpp"
#include "tracking_source.hpp"

#include <allotheque/allocator.hpp>
#include <allotheque/allocators/defero.hpp>
#include <allotheque/allocators/kingsley.hpp>
#include <allotheque/allocators/velox.hpp>
#include <allotheque/heap.hpp>
#include <allotheque/layers/per_thread.hpp>
#include <allotheque/hint_policy.hpp>
#include <allotheque/memory_resource.hpp>
#include <allotheque/scoped_hint.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <list>
#include <map>
#include <memory>
#include <memory_resource>
#include <new>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace al = allotheque;
using allotheque_test::source_ledger;
using allotheque_test::tracking_source;

namespace {

using kingsley = al::kingsley_heap<tracking_source>;
using velox = al::velox_heap<tracking_source>;
using defero = al::defero_heap<tracking_source>;

std::uintptr_t addr(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

// Records every request on its way to a real heap.
template <class H>
struct recording_heap {
    static constexpr std::size_t max_alignment = H::max_alignment;
    static constexpr bool locality_aware = H::locality_aware;
    H inner;
    std::vector<al::request> allocs, deallocs;
    explicit recording_heap(source_ledger& l) : inner(tracking_source(l)) {}
    void* allocate(const al::request& r) {
        allocs.push_back(r);
        return inner.allocate(r);
    }
    void deallocate(void* p, const al::request& r) noexcept {
        deallocs.push_back(r);
        inner.deallocate(p, r);
    }
    const void* last_allocation() const noexcept { return inner.last_allocation(); }
};

struct alignas(64) line {
    char bytes[64];
};
struct alignas(16) pair16 {
    double a, b;
};
struct alignas(4096) page_t {
    char bytes[4096];
};

template <class Heap>
void exercise_containers(Heap& h) {
    using std::size_t;
    // vector
    std::vector<int, al::allocator<int, Heap>> v{al::allocator<int, Heap>(h)};
    for (int i = 0; i < 20000; ++i) v.push_back(i);
    v.shrink_to_fit();
    for (int i = 0; i < 20000; ++i) REQUIRE(v[static_cast<size_t>(i)] == i);
    // list
    std::list<long, al::allocator<long, Heap>> l{al::allocator<long, Heap>(h)};
    for (long i = 0; i < 5000; ++i) (i % 2 ? l.push_back(i) : l.push_front(i));
    l.sort();
    long expect = 0;
    for (long x : l) REQUIRE(x == expect++);
    // map
    using map_alloc = al::allocator<std::pair<const int, std::string>, Heap>;
    std::map<int, std::string, std::less<int>, map_alloc> m{map_alloc(h)};
    for (int i = 0; i < 3000; ++i) m.emplace(i * 7 % 3001, std::to_string(i));
    REQUIRE(m.size() == 3000u);
    for (int i = 0; i < 3000; i += 2) m.erase(i * 7 % 3001);
    REQUIRE(m.size() == 1500u);
    for (auto& [k, s] : m) REQUIRE(k % 1 == 0);
    // unordered_map
    using umap_alloc = al::allocator<std::pair<const std::uint64_t, std::uint64_t>, Heap>;
    std::unordered_map<std::uint64_t, std::uint64_t, std::hash<std::uint64_t>, std::equal_to<>, umap_alloc> um{
        0, std::hash<std::uint64_t>{}, std::equal_to<>{}, umap_alloc(h)};
    for (std::uint64_t i = 0; i < 5000; ++i) um[i * 2654435761u] = i;
    for (std::uint64_t i = 0; i < 5000; ++i) REQUIRE(um.at(i * 2654435761u) == i);
    um.rehash(20000);
    for (std::uint64_t i = 0; i < 5000; ++i) REQUIRE(um.at(i * 2654435761u) == i);
    // deque
    std::deque<pair16, al::allocator<pair16, Heap>> d{al::allocator<pair16, Heap>(h)};
    for (int i = 0; i < 10000; ++i) (i % 2 ? d.push_back({double(i), 0}) : d.push_front({double(i), 0}));
    for (const pair16& p : d) REQUIRE(addr(&p) % 16 == 0);
    while (d.size() > 10) d.pop_front();
    // basic_string (well beyond the small-string buffer)
    using str = std::basic_string<char, std::char_traits<char>, al::allocator<char, Heap>>;
    str s{al::allocator<char, Heap>(h)};
    for (int i = 0; i < 2000; ++i) s += static_cast<char>('a' + i % 26);
    REQUIRE(s.size() == 2000u);
    str s2 = s + s;
    REQUIRE(s2.size() == 4000u);
    // (substr would need a default-constructed allocator: not available by design.)
    REQUIRE(std::string_view(s2).substr(2000, 5) == "abcde");
    REQUIRE(s2.get_allocator() == s.get_allocator());
    REQUIRE(s2.get_allocator().heap().stats().os_bytes > 0u);
    // Copy / move / swap with the same allocator.
    auto v2 = v;
    REQUIRE(v2 == v);
    auto v3 = std::move(v2);
    REQUIRE(v3.size() == 20000u);
    v3.swap(v);
    REQUIRE(v.size() == 20000u);
}

} // namespace

// ---- allocator_traits properties ------------------------------------------
using A = al::allocator<int, kingsley>;
using traits = std::allocator_traits<A>;
static_assert(std::is_same_v<traits::value_type, int>);
static_assert(std::is_same_v<traits::rebind_alloc<double>, al::allocator<double, kingsley>>);
static_assert(std::is_same_v<traits::rebind_alloc<double>, al::allocator<double, kingsley, al::no_hint>>);
static_assert(std::is_same_v<std::allocator_traits<al::allocator<int, velox>>::rebind_alloc<char>,
                             al::allocator<char, velox, al::near_previous>>);
static_assert(traits::propagate_on_container_copy_assignment::value);
static_assert(traits::propagate_on_container_move_assignment::value);
static_assert(traits::propagate_on_container_swap::value);
static_assert(!traits::is_always_equal::value);
static_assert(std::is_nothrow_copy_constructible_v<A>);
static_assert(!std::is_default_constructible_v<A>, "an allocator needs its heap");
static_assert(std::is_constructible_v<al::allocator<int, kingsley>, const al::allocator<double, kingsley>&>);
static_assert(!std::is_convertible_v<kingsley&, A>, "construction from a heap is explicit");
static_assert(std::is_same_v<al::default_hint_policy<velox>::type, al::near_previous>);
static_assert(std::is_same_v<al::default_hint_policy<kingsley>::type, al::no_hint>);
static_assert(std::is_same_v<al::default_hint_policy<defero>::type, al::near_previous>);
static_assert(velox::locality_aware && defero::locality_aware && !kingsley::locality_aware);

TEST_CASE("allocator: equality by heap, rebind and copies share the heap", "[stl]") {
    source_ledger l1, l2;
    {
        kingsley h1{tracking_source(l1)}, h2{tracking_source(l2)};
        al::allocator<int, kingsley> a(h1), b(h1), c(h2);
        CHECK(a == b);
        CHECK(!(a == c));
        CHECK(a != c);
        al::allocator<double, kingsley> d(a);   // rebind copy
        CHECK(&d.heap() == &h1);
        CHECK(a == d);
        CHECK(d != c);
        typename traits::rebind_alloc<long> e(a);
        CHECK(&e.heap() == &h1);
        // Memory from a rebound copy goes back through the original.
        double* p = d.allocate(10);
        al::allocator<double, kingsley>(a).deallocate(p, 10);
        // select_on_container_copy_construction keeps the heap.
        CHECK(&traits::select_on_container_copy_construction(a).heap() == &h1);
    }
    CHECK(l1.balanced());
    CHECK(l2.balanced());
}

TEST_CASE("allocator: containers propagate the allocator on assignment and swap", "[stl]") {
    source_ledger l1, l2;
    {
        kingsley h1{tracking_source(l1)}, h2{tracking_source(l2)};
        using V = std::vector<int, A>;
        V v1(100, 1, A(h1)), v2(50, 2, A(h2));
        v2 = v1;   // copy assignment propagates h1
        CHECK(&v2.get_allocator().heap() == &h1);
        V v3(10, 3, A(h2));
        v3 = std::move(v1);
        CHECK(&v3.get_allocator().heap() == &h1);
        V v4(5, 4, A(h2));
        v4.swap(v3);
        CHECK(&v4.get_allocator().heap() == &h1);
        CHECK(&v3.get_allocator().heap() == &h2);
        CHECK(v4.size() == 100u);
    }
    CHECK(l1.balanced());
    CHECK(l2.balanced());
}

TEST_CASE("allocator: bad sizes", "[stl]") {
    source_ledger l;
    {
        kingsley h{tracking_source(l)};
        al::allocator<int, kingsley> a(h);
        CHECK_THROWS_AS((void)a.allocate(std::numeric_limits<std::size_t>::max() / sizeof(int) + 1),
                        std::bad_array_new_length);
        CHECK_THROWS_AS((void)a.allocate(std::numeric_limits<std::size_t>::max()), std::bad_array_new_length);
        al::allocator<line, kingsley> al64(h);
        CHECK_THROWS_AS((void)al64.allocate(std::numeric_limits<std::size_t>::max() / 64 + 1), std::bad_array_new_length);
        // Not overflowing but too large for the heap: bad_alloc.
        CHECK(a.max_size() == std::size_t(std::numeric_limits<std::ptrdiff_t>::max() / 2 / sizeof(int)));
        CHECK_THROWS_AS((void)a.allocate(a.max_size() + 1), std::bad_alloc);
        CHECK_THROWS_AS((void)a.allocate(std::numeric_limits<std::size_t>::max() / sizeof(int)), std::bad_alloc);
        // n == 0: valid and unique.
        std::set<int*> zeros;
        for (int i = 0; i < 100; ++i) {
            int* p = a.allocate(0);
            REQUIRE(p != nullptr);
            REQUIRE(zeros.insert(p).second);
        }
        for (int* p : zeros) a.deallocate(p, 0);
        // The heap is fine afterwards.
        int* p = a.allocate(10);
        p[9] = 9;
        a.deallocate(p, 10);
    }
    CHECK(l.balanced());
}

TEST_CASE("allocator: alignment of over-aligned types reaches the heap", "[stl]") {
    source_ledger l;
    {
        recording_heap<kingsley> h(l);
        al::allocator<int, recording_heap<kingsley>> ai(h);
        al::allocator<line, recording_heap<kingsley>> a64(h);
        al::allocator<pair16, recording_heap<kingsley>> a16(h);
        al::allocator<page_t, recording_heap<kingsley>> a4k(h);
        int* pi = ai.allocate(3);
        CHECK(h.allocs.back().size == 12u);
        CHECK(h.allocs.back().alignment == 0u);
        line* pl = a64.allocate(3);
        CHECK(h.allocs.back().size == 192u);
        CHECK(h.allocs.back().alignment == 64u);
        CHECK(addr(pl) % 64 == 0);
        pair16* pp = a16.allocate(5);
        CHECK(h.allocs.back().alignment == 16u);
        CHECK(addr(pp) % 16 == 0);
        page_t* pg = a4k.allocate(2);
        CHECK(h.allocs.back().alignment == 4096u);
        CHECK(addr(pg) % 4096 == 0);
        a64.deallocate(pl, 3);
        CHECK(h.deallocs.back().size == 192u);
        CHECK(h.deallocs.back().alignment == 64u);
        a4k.deallocate(pg, 2);
        a16.deallocate(pp, 5);
        ai.deallocate(pi, 3);
        CHECK(h.deallocs.back().size == 12u);
        CHECK(h.deallocs.back().alignment == 0u);
    }
    CHECK(l.balanced());
}

TEST_CASE("allocator: hints via allocator_traits, near() and the policy", "[stl]") {
    source_ledger l;
    {
        recording_heap<velox> h(l);
        using VA = al::allocator<int, recording_heap<velox>>;
        using VT = std::allocator_traits<VA>;
        VA a(h);
        int* first = VT::allocate(a, 4);
        // Policy (near_previous): the heap's last allocation.
        int* second = VT::allocate(a, 4);
        CHECK(h.allocs.back().hint == first);
        // Explicit hint through allocator_traits::allocate(a, n, hint).
        int marker = 0;
        int* third = VT::allocate(a, 4, &marker);
        CHECK(h.allocs.back().hint == &marker);
        {
            auto scope = al::near(second);
            int* fourth = VT::allocate(a, 4);
            CHECK(h.allocs.back().hint == second);
            {
                auto inner = al::near(third);
                int* fifth = a.allocate(1);
                CHECK(h.allocs.back().hint == third);
                a.deallocate(fifth, 1);
            }
            int* sixth = a.allocate(1);
            CHECK(h.allocs.back().hint == second);   // the outer scope is back
            int* seventh = a.allocate(1, first);   // explicit beats the scope
            CHECK(h.allocs.back().hint == first);
            a.deallocate(seventh, 1);
            a.deallocate(sixth, 1);
            VT::deallocate(a, fourth, 4);
        }
        CHECK(al::current_scoped_hint() == nullptr);
        int* eighth = a.allocate(1);
        CHECK(h.allocs.back().hint != nullptr);   // near_previous again once the scopes are gone
        a.deallocate(eighth, 1);
        VT::deallocate(a, third, 4);
        VT::deallocate(a, second, 4);
        VT::deallocate(a, first, 4);
        for (const auto& r : h.deallocs) CHECK(r.hint == nullptr);
    }
    {
        recording_heap<kingsley> h(l);
        al::allocator<int, recording_heap<kingsley>> a(h);
        int* p = a.allocate(1);
        int* q = a.allocate(1);
        CHECK(h.allocs.back().hint == nullptr);   // no_hint policy
        a.deallocate(q, 1);
        a.deallocate(p, 1);
        // A custom policy.
        al::allocator<int, recording_heap<kingsley>, al::near_previous> b(h);
        int* r = b.allocate(1);
        int* s = b.allocate(1);
        // Kingsley reads no hint, so it keeps no previous allocation to offer.
        CHECK(h.allocs.back().hint == nullptr);
        b.deallocate(s, 1);
        b.deallocate(r, 1);
    }
    CHECK(l.balanced());
}

TEST_CASE("allocator with std containers: kingsley", "[stl]") {
    source_ledger l;
    {
        kingsley h{tracking_source(l)};
        exercise_containers(h);
    }
    CHECK(l.balanced());
}
TEST_CASE("allocator with std containers: velox", "[stl]") {
    source_ledger l;
    {
        velox h{tracking_source(l)};
        exercise_containers(h);
    }
    CHECK(l.balanced());
}
TEST_CASE("allocator with std containers: defero", "[stl]") {
    source_ledger l;
    {
        defero h{tracking_source(l)};
        exercise_containers(h);
    }
    CHECK(l.balanced());
}

TEST_CASE("containers give every block back to the heap", "[stl]") {
    source_ledger l;
    {
        recording_heap<velox> h(l);
        {
            std::map<int, int, std::less<int>, al::allocator<std::pair<const int, int>, recording_heap<velox>>> m{
                al::allocator<std::pair<const int, int>, recording_heap<velox>>(h)};
            for (int i = 0; i < 1000; ++i) m[i] = i;
            std::list<int, al::allocator<int, recording_heap<velox>>> li(500, 7, al::allocator<int, recording_heap<velox>>(h));
        }
        CHECK(h.allocs.size() == h.deallocs.size());
        CHECK(h.allocs.size() >= 1500u);
    }
    CHECK(l.balanced());
}

// ---- memory_resource --------------------------------------------------------

TEST_CASE("memory_resource with std::pmr containers", "[stl][pmr]") {
    source_ledger l;
    {
        velox h{tracking_source(l)};
        al::memory_resource<velox> res(h);
        CHECK(&res.heap() == &h);
        {
            std::pmr::vector<int> v(&res);
            for (int i = 0; i < 10000; ++i) v.push_back(i);
            for (int i = 0; i < 10000; ++i) REQUIRE(v[static_cast<std::size_t>(i)] == i);
            std::pmr::string s(&res);
            for (int i = 0; i < 500; ++i) s += "xyz";
            CHECK(s.size() == 1500u);
            CHECK(s.get_allocator().resource() == &res);
            std::pmr::map<int, std::pmr::string> m(&res);
            for (int i = 0; i < 1000; ++i) m.emplace(i, std::pmr::string(100, static_cast<char>('a' + i % 26)));
            CHECK(m.at(27).get_allocator().resource() == &res);   // uses-allocator construction
            CHECK(std::string_view(m.at(27)) == std::string(100, 'b'));
            CHECK(h.stats().os_bytes > 0u);
        }
    }
    CHECK(l.balanced());
}

TEST_CASE("memory_resource: identity equality, alignment, failures", "[stl][pmr]") {
    source_ledger l;
    {
        kingsley h{tracking_source(l)};
        al::memory_resource<kingsley> r1(h), r2(h);
        CHECK(r1.is_equal(r1));
        CHECK(!r1.is_equal(r2));   // same heap, but identity is what pmr compares
        CHECK(r1 == r1);
        CHECK(r1 != r2);
        CHECK(!r1.is_equal(*std::pmr::new_delete_resource()));
        for (std::size_t a : {1u, 2u, 4u, 8u, 16u, 64u, 256u, 4096u}) {
            void* p = r1.allocate(100, a);
            CHECK(addr(p) % a == 0);
            std::memset(p, 1, 100);
            r1.deallocate(p, 100, a);
        }
        void* big_aligned = r1.allocate(16, 8192);   // beyond a page: a large block
        CHECK(addr(big_aligned) % 8192 == 0);
        r1.deallocate(big_aligned, 16, 8192);
        CHECK_THROWS_AS(r1.allocate(16, std::size_t{1} << 31), std::bad_alloc);
        for (std::size_t a : {std::size_t{3}, std::size_t{5}, std::size_t{6}, std::size_t{7}, std::size_t{24}})
            CHECK_THROWS_AS(r1.allocate(16, a), std::bad_alloc);   // not a power of two
        CHECK_THROWS_AS(r1.allocate(std::numeric_limits<std::size_t>::max(), 8), std::bad_alloc);
        // Exhaustion.
        l.limit = l.bytes;
        CHECK_THROWS_AS(r1.allocate(1 << 20, 8), std::bad_alloc);
        l.limit = std::numeric_limits<std::size_t>::max();
        void* p = r1.allocate(1 << 20, 8);
        r1.deallocate(p, 1 << 20, 8);
    }
    CHECK(l.balanced());
    // Over a heap that takes no alignment above 4096 (per_thread): bad_alloc.
    al::layers::per_thread<al::kingsley_heap<>> pt;
    al::memory_resource<al::layers::per_thread<al::kingsley_heap<>>> r3(pt);
    void* q = r3.allocate(100, 4096);
    CHECK(addr(q) % 4096 == 0);
    r3.deallocate(q, 100, 4096);
    CHECK_THROWS_AS(r3.allocate(100, 8192), std::bad_alloc);
}
