// Allocation predicates: the generic search over a test cursor (which class is
// attempted first, the fallback order, refusals continuing the walk), then the
// same predicates inside real containers (list, rb_tree) fed chunks by hand;
// then the predicate protocol: the concept, the cursor capabilities each
// container offers, every container going through the one hook, and `nearest`
// (a predicate written against the protocol alone) on cursors and containers.
#include "catch.hpp"

#include <allotheque/attributes/address_bits.hpp>
#include <allotheque/attributes/size.hpp>
#include <allotheque/containers/hash_table.hpp>
#include <allotheque/containers/list.hpp>   // alone brings list<Attr, void, Pred> (element_list.hpp)
#include <allotheque/containers/rb_tree.hpp>
#include <allotheque/containers/search.hpp>
#include <allotheque/hashes/identity.hpp>
#include <allotheque/hashes/pow2_segregation.hpp>
#include <allotheque/predicates/bounded.hpp>
#include <allotheque/predicates/fits.hpp>
#include <allotheque/predicates/match.hpp>
#include <allotheque/predicates/nearest.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <tuple>
#include <vector>

namespace al = allotheque;

namespace {

// Classes are the positions of a vector; the value of class i is values[i].
struct test_cursor {
    using handle = std::size_t;
    using value_type = unsigned;
    static constexpr handle nil = static_cast<handle>(-1);
    std::vector<unsigned> values;
    handle remembered = nil;

    handle none() const noexcept { return nil; }
    handle first() const noexcept { return values.empty() ? nil : 0; }
    handle next(handle h) const noexcept { return h + 1 < values.size() ? h + 1 : nil; }
    handle lookup(value_type v) const noexcept {
        for (handle h = 0; h < values.size(); ++h)
            if (values[h] == v) return h;
        return nil;
    }
    value_type value(handle h) const noexcept { return values[h]; }
    handle last() const noexcept { return remembered; }
};
static_assert(al::class_cursor<test_cursor>);

std::byte arena[64];

struct outcome {
    std::vector<std::size_t> attempts;
    std::ptrdiff_t served = -1;   // the class that served, -1: nullptr
};

// Runs search<Pred>; classes listed in `refuse` return nullptr when attempted.
template <class Pred>
outcome run(std::vector<unsigned> values, unsigned target, std::set<std::size_t> refuse = {},
            std::size_t last = test_cursor::nil) {
    test_cursor c{std::move(values), last};
    outcome o;
    std::byte* p = al::search<Pred>(c, target, [&](std::size_t h) -> std::byte* {
        o.attempts.push_back(h);
        return refuse.count(h) ? nullptr : arena + h;
    });
    if (p) o.served = p - arena;
    return o;
}
using v = std::vector<std::size_t>;

} // namespace

static_assert(al::allocation_predicate<al::any> && al::allocation_predicate<al::match_next>);
static_assert(!al::any::remembers && !al::first_fit::remembers && !al::best_fit::remembers &&
              !al::worst_fit::remembers && !al::match::remembers && !al::match_only::remembers &&
              !al::match_first::remembers);
static_assert(al::next_fit::remembers && al::match_last_first::remembers && al::match_next::remembers);
// Only match_last_first counts a free as a use (Defero's `next` caches the
// class an allocation was served from, as the paper describes it).
static_assert(al::predicate_remembers_frees<al::match_last_first> && !al::predicate_remembers_frees<al::match_next> &&
              !al::predicate_remembers_frees<al::next_fit> && !al::predicate_remembers_frees<al::match_first> &&
              al::predicate_remembers_frees<al::bounded<al::match_last_first, 4>>);
// match_size_last_first keeps the class used last per size, and only that.
static_assert(al::allocation_predicate<al::match_size_last_first> &&
              al::predicate_last_per_size<al::match_size_last_first> &&
              !al::predicate_last_per_size<al::match_last_first> && !al::predicate_last_per_size<al::match_first> &&
              !al::predicate_takes_last_free<al::match_size_last_first>);
static_assert(al::is_exact_match<al::match> && al::is_exact_match<al::match_only>);
static_assert(!al::is_exact_match<al::match_first> && !al::is_exact_match<al::match_last_first> &&
              !al::is_exact_match<al::match_next> && !al::is_exact_match<al::first_fit> &&
              !al::is_exact_match<al::best_fit> && !al::is_exact_match<al::any>);
static_assert(!al::can_leave_target<al::match> && !al::can_leave_target<al::match_only>);
static_assert(al::can_leave_target<al::match_first> && al::can_leave_target<al::match_last_first> &&
              al::can_leave_target<al::match_next> && al::can_leave_target<al::any> &&
              al::can_leave_target<al::first_fit>);

TEST_CASE("search: any takes the first class, refusals move on", "[predicates]") {
    auto o = run<al::any>({5, 3, 9}, 100);
    CHECK(o.attempts == v{0});
    CHECK(o.served == 0);
    o = run<al::any>({5, 3, 9}, 100, {0, 1});
    CHECK(o.attempts == v{0, 1, 2});
    CHECK(o.served == 2);
    o = run<al::any>({5, 3, 9}, 0, {0, 1, 2});
    CHECK(o.served == -1);
    o = run<al::any>({}, 1);
    CHECK(o.attempts.empty());
    CHECK(o.served == -1);
}

TEST_CASE("search: first_fit", "[predicates]") {
    auto o = run<al::first_fit>({5, 3, 9, 7}, 6);
    CHECK(o.attempts == v{2});
    CHECK(o.served == 2);
    o = run<al::first_fit>({5, 3, 9, 7}, 6, {2});
    CHECK(o.attempts == v{2, 3});   // 3 is never tried: too small
    CHECK(o.served == 3);
    o = run<al::first_fit>({5, 3, 9, 7}, 5);
    CHECK(o.served == 0);   // >= includes equality
    o = run<al::first_fit>({5, 3, 9, 7}, 10);
    CHECK(o.attempts.empty());
    CHECK(o.served == -1);
}

TEST_CASE("search: next_fit starts at the remembered class and wraps", "[predicates]") {
    auto o = run<al::next_fit>({8, 3, 9, 7}, 6, {}, 2);
    CHECK(o.attempts == v{2});
    o = run<al::next_fit>({8, 3, 9, 7}, 6, {2}, 2);
    CHECK(o.attempts == v{2, 3});
    o = run<al::next_fit>({8, 3, 9, 7}, 6, {2, 3}, 2);
    CHECK(o.attempts == v{2, 3, 0});   // wrap; class 1 is too small
    CHECK(o.served == 0);
    o = run<al::next_fit>({8, 3, 9, 7}, 6, {0, 2, 3}, 2);
    CHECK(o.attempts == v{2, 3, 0});
    CHECK(o.served == -1);
    // Nothing remembered: from the beginning, no second pass.
    o = run<al::next_fit>({8, 3, 9, 7}, 6, {0, 2, 3});
    CHECK(o.attempts == v{0, 2, 3});
    // A remembered class that is too small is skipped.
    o = run<al::next_fit>({8, 3, 9, 7}, 6, {}, 1);
    CHECK(o.attempts == v{2});
}

TEST_CASE("search: best_fit tries the smallest fitting class first", "[predicates]") {
    auto o = run<al::best_fit>({9, 6, 3, 7}, 5);
    CHECK(o.attempts == v{1});
    CHECK(o.served == 1);
    o = run<al::best_fit>({9, 6, 3, 7}, 7);
    CHECK(o.attempts == v{3});   // equality is the best fit
    // The best class refuses: the other fitting classes, in container order.
    o = run<al::best_fit>({9, 6, 3, 7}, 5, {1});
    CHECK(o.attempts == v{1, 0});
    CHECK(o.served == 0);
    o = run<al::best_fit>({9, 6, 3, 7}, 5, {0, 1, 3});
    CHECK(o.attempts == v{1, 0, 3});   // 3 (value 3) is never tried
    CHECK(o.served == -1);
    o = run<al::best_fit>({1, 2}, 5);
    CHECK(o.attempts.empty());
    // Ties: the first of equal values.
    o = run<al::best_fit>({9, 6, 6}, 5);
    CHECK(o.attempts == v{1});
}

TEST_CASE("search: worst_fit tries the largest class first", "[predicates]") {
    auto o = run<al::worst_fit>({4, 9, 2, 9}, 3);
    CHECK(o.attempts == v{1});
    o = run<al::worst_fit>({4, 9, 2, 9}, 3, {1});
    CHECK(o.attempts == v{1, 0});
    o = run<al::worst_fit>({4, 9, 2, 9}, 3, {0, 1});
    CHECK(o.attempts == v{1, 0, 2});   // worst_fit does not filter by target
    CHECK(o.served == 2);
}

TEST_CASE("search: match walks to an equal class", "[predicates]") {
    auto o = run<al::match>({4, 6, 6, 8}, 6);
    CHECK(o.attempts == v{1});
    o = run<al::match>({4, 6, 6, 8}, 6, {1});
    CHECK(o.attempts == v{1, 2});
    CHECK(o.served == 2);
    o = run<al::match>({4, 6, 6, 8}, 6, {1, 2});
    CHECK(o.served == -1);
    o = run<al::match>({4, 6, 8}, 7);
    CHECK(o.attempts.empty());
}

TEST_CASE("search: match_only never falls back", "[predicates]") {
    auto o = run<al::match_only>({4, 6, 8}, 8);
    CHECK(o.attempts == v{2});
    o = run<al::match_only>({4, 6, 8}, 8, {2}, 0);
    CHECK(o.attempts == v{2});
    CHECK(o.served == -1);
    o = run<al::match_only>({4, 6, 8}, 5, {}, 0);
    CHECK(o.attempts.empty());
    CHECK(o.served == -1);
}

TEST_CASE("search: match_first falls back to the first class", "[predicates]") {
    auto o = run<al::match_first>({4, 6, 8}, 6);
    CHECK(o.attempts == v{1});
    o = run<al::match_first>({4, 6, 8}, 6, {1});
    CHECK(o.attempts == v{1, 0});
    o = run<al::match_first>({4, 6, 8}, 6, {0, 1});
    CHECK(o.attempts == v{1, 0, 2});   // the looked-up class is not tried twice
    CHECK(o.served == 2);
    o = run<al::match_first>({4, 6, 8}, 7, {0}, 2);   // remembered class is ignored
    CHECK(o.attempts == v{0, 1});
    CHECK(o.served == 1);
}

TEST_CASE("search: match_last_first: target, then last used, then first", "[predicates]") {
    auto o = run<al::match_last_first>({4, 6, 8, 10}, 6, {}, 2);
    CHECK(o.attempts == v{1});
    o = run<al::match_last_first>({4, 6, 8, 10}, 6, {1}, 2);
    CHECK(o.attempts == v{1, 2});
    CHECK(o.served == 2);
    o = run<al::match_last_first>({4, 6, 8, 10}, 6, {1, 2}, 2);
    CHECK(o.attempts == v{1, 2, 0});   // neither looked nor last is tried again
    CHECK(o.served == 0);
    o = run<al::match_last_first>({4, 6, 8, 10}, 6, {0, 1, 2}, 2);
    CHECK(o.attempts == v{1, 2, 0, 3});
    o = run<al::match_last_first>({4, 6, 8, 10}, 7, {}, 3);   // absent target: last
    CHECK(o.attempts == v{3});
    o = run<al::match_last_first>({4, 6, 8, 10}, 7);   // absent, nothing remembered: first
    CHECK(o.attempts == v{0});
    o = run<al::match_last_first>({4, 6, 8, 10}, 6, {1}, 1);   // last == looked: not retried
    CHECK(o.attempts == v{1, 0});
    o = run<al::match_last_first>({4, 6, 8, 10}, 6, {0, 1, 2, 3}, 2);
    CHECK(o.served == -1);
    CHECK(o.attempts.size() == 4);
}

TEST_CASE("search: match_next checks the remembered class before the lookup", "[predicates]") {
    // Two classes of value 6: the lookup finds 0, the remembered one is 2.
    auto o = run<al::match_next>({6, 4, 6}, 6, {}, 2);
    CHECK(o.attempts == v{2});
    CHECK(o.served == 2);
    // Remembered class of another value: lookup first, then last, then first.
    o = run<al::match_next>({6, 4, 8}, 6, {}, 2);
    CHECK(o.attempts == v{0});
    o = run<al::match_next>({6, 4, 8}, 6, {0}, 2);
    CHECK(o.attempts == v{0, 2});
    o = run<al::match_next>({6, 4, 8}, 6, {0, 2}, 2);
    CHECK(o.attempts == v{0, 2, 1});
    CHECK(o.served == 1);
    o = run<al::match_next>({6, 4, 8}, 5, {}, -1);
    CHECK(o.attempts == v{0});   // absent, nothing remembered: first
    // Everything refuses: every class was tried, and the result is nullptr.
    o = run<al::match_next>({6, 4, 6}, 6, {0, 1, 2}, 2);
    CHECK(o.served == -1);
    CHECK(std::set<std::size_t>(o.attempts.begin(), o.attempts.end()) == std::set<std::size_t>{0, 1, 2});
    CHECK(o.attempts.front() == 2);
}

// ---- the predicates inside real containers -------------------------------

namespace {

// Chunks laid out in one buffer; each test deallocates some into a container.
struct alignas(64) chunk_buffer {
    std::byte bytes[16 * 1024];
    std::byte* at(std::size_t off) { return bytes + off; }
};

template <class P>
struct container {
    union {   // constructed and destroyed by P::init / P::destroy only, as in the heaps
        typename P::header_type h;
    };
    chunk_buffer buf;
    container() { P::init(h); }
    ~container() { P::destroy(h); }
    void free(std::size_t off, std::size_t n) { P::deallocate(h, buf.at(off), n); }
    std::ptrdiff_t take(std::size_t n) {
        std::byte* p = P::allocate(h, al::request{n, nullptr, 0});
        return p ? p - buf.bytes : -1;
    }
};

// Offsets 1 KiB apart; sizes inserted in this order.
constexpr std::size_t o32 = 0, o64 = 1024, o48 = 2048, o128 = 3072;

template <class P>
void fill4(container<P>& c) {
    c.free(o32, 32);
    c.free(o64, 64);
    c.free(o48, 48);
    c.free(o128, 128);
}

} // namespace

TEST_CASE("list<size, list<void>, Pred>: which chunk comes back", "[predicates][list]") {
    SECTION("best_fit") {
        container<al::list<al::size, al::list<void>, al::best_fit>> c;
        fill4(c);
        CHECK(c.take(40) == std::ptrdiff_t(o48));
        CHECK(c.take(40) == std::ptrdiff_t(o64));
        CHECK(c.take(40) == std::ptrdiff_t(o128));
        CHECK(c.take(40) == -1);
        CHECK(c.take(32) == std::ptrdiff_t(o32));
        CHECK(c.take(1) == -1);
    }
    SECTION("first_fit: classes are pushed at the front, so the newest fitting class wins") {
        container<al::list<al::size, al::list<void>, al::first_fit>> c;
        fill4(c);
        CHECK(c.take(40) == std::ptrdiff_t(o128));
        CHECK(c.take(40) == std::ptrdiff_t(o48));
        CHECK(c.take(40) == std::ptrdiff_t(o64));
        CHECK(c.take(40) == -1);
    }
    SECTION("worst_fit") {
        container<al::list<al::size, al::list<void>, al::worst_fit>> c;
        fill4(c);
        CHECK(c.take(8) == std::ptrdiff_t(o128));
        CHECK(c.take(8) == std::ptrdiff_t(o64));
        CHECK(c.take(8) == std::ptrdiff_t(o48));
        CHECK(c.take(8) == std::ptrdiff_t(o32));
        CHECK(c.take(8) == -1);
    }
    SECTION("match: exact sizes only") {
        container<al::list<al::size, al::list<void>, al::match>> c;
        fill4(c);
        CHECK(c.take(40) == -1);
        CHECK(c.take(64) == std::ptrdiff_t(o64));
        CHECK(c.take(64) == -1);
        CHECK(c.take(48) == std::ptrdiff_t(o48));
    }
    SECTION("any: the front class") {
        container<al::list<al::size, al::list<void>, al::any>> c;
        fill4(c);
        CHECK(c.take(1000) == std::ptrdiff_t(o128));   // any ignores the target
    }
    SECTION("next_fit resumes at the class used last") {
        container<al::list<al::size, al::list<void>, al::next_fit>> c;
        // Two chunks of 64 (one class) and one of 128.
        c.free(o64, 64);
        c.free(o64 + 64, 64);
        c.free(o128, 128);   // list order: 128, 64
        CHECK(c.take(50) == std::ptrdiff_t(o128));   // first fitting from the beginning
        CHECK(c.take(50) == std::ptrdiff_t(o64 + 64));   // the nested chunk before the host
        CHECK(c.take(50) == std::ptrdiff_t(o64));   // the host last
        CHECK(c.take(50) == -1);
    }
    SECTION("match_last_first: a free makes its class the one used last") {
        container<al::list<al::size, al::list<void>, al::match_last_first>> c;
        c.free(o32, 32);
        c.free(o128, 128);       // list order: 128, 32
        c.free(o32 + 32, 32);    // into class 32, which becomes the last used
        CHECK(c.take(40) == std::ptrdiff_t(o32 + 32));   // absent size: last used, not the front (128)
        CHECK(c.take(40) == std::ptrdiff_t(o32));        // class 32 again, its host; it disappears
        CHECK(c.take(40) == std::ptrdiff_t(o128));       // nothing remembered: the front
        CHECK(c.take(40) == -1);
    }
    SECTION("several chunks per class: the nested chunks first, the host last") {
        container<al::list<al::size, al::list<void>, al::match>> c;
        c.free(0, 64);      // host of class 64
        c.free(64, 64);
        c.free(128, 64);
        CHECK(c.take(64) == 128);
        CHECK(c.take(64) == 64);
        CHECK(c.take(64) == 0);
        CHECK(c.take(64) == -1);
        // The class is gone; a new one can form at a new host.
        c.free(512, 64);
        CHECK(c.take(64) == 512);
    }
}

TEST_CASE("rb_tree<size, list<void>, Pred>: lower_bound and lookup paths", "[predicates][rb_tree]") {
    SECTION("match_last_first: a free makes its class the one used last") {
        container<al::rb_tree<al::size, al::list<void>, al::match_last_first>> c;
        c.free(o32, 32);
        c.free(o128, 128);   // the last free: class 128 is the last used
        CHECK(c.take(40) == std::ptrdiff_t(o128));   // absent size: last used, not the lowest (32)
        CHECK(c.take(40) == std::ptrdiff_t(o32));    // 128 is gone: the lowest
        CHECK(c.take(40) == -1);
    }
    SECTION("first_fit (lower bound)") {
        container<al::rb_tree<al::size, al::list<void>, al::first_fit>> c;
        c.free(0, 48);
        c.free(1024, 96);
        c.free(2048, 64);
        c.free(3072, 128);
        CHECK(c.take(50) == 2048);   // 64: smallest >= 50, whatever the insertion order
        CHECK(c.take(50) == 1024);
        CHECK(c.take(50) == 3072);
        CHECK(c.take(50) == -1);
        CHECK(c.take(48) == 0);
    }
    SECTION("best_fit (lower bound) with several chunks in a class") {
        container<al::rb_tree<al::size, al::list<void>, al::best_fit>> c;
        c.free(0, 96);
        c.free(1024, 64);
        c.free(1024 + 64, 64);
        CHECK(c.take(64) == 1024 + 64);
        CHECK(c.take(60) == 1024);
        CHECK(c.take(60) == 0);
        CHECK(c.take(1) == -1);
    }
    SECTION("match_only (lookup)") {
        container<al::rb_tree<al::size, al::list<void>, al::match_only>> c;
        c.free(0, 48);
        c.free(1024, 96);
        CHECK(c.take(64) == -1);
        CHECK(c.take(96) == 1024);
        CHECK(c.take(96) == -1);
    }
    SECTION("match_first (lookup, else the smallest class)") {
        container<al::rb_tree<al::size, al::list<void>, al::match_first>> c;
        c.free(0, 128);
        c.free(1024, 96);
        c.free(2048, 48);
        CHECK(c.take(96) == 1024);
        CHECK(c.take(80) == 2048);   // absent: first = lowest value
        CHECK(c.take(80) == 0);
    }
    SECTION("match_next remembers the class") {
        container<al::rb_tree<al::size, al::list<void>, al::match_next>> c;
        c.free(0, 64);
        c.free(64, 64);
        c.free(128, 64);
        c.free(1024, 128);
        CHECK(c.take(128) == 1024);
        CHECK(c.take(64) == 128);
        CHECK(c.take(64) == 64);
        CHECK(c.take(64) == 0);
        CHECK(c.take(64) == -1);
    }
}

// ---- the predicate protocol ------------------------------------------------

// A named namespace: clang warns about unused constants of internal classes,
// and these exist only for the concept to look at.
namespace protocol_cases {

// Not predicates: each misses one requirement of allocation_predicate.
struct finder {   // a search that takes the first class
    template <class C, class A>
    static std::byte* search(C& c, typename C::value_type, A&& attempt) {
        for (auto h = c.first(); h != c.none(); h = c.next(h))
            if (std::byte* p = attempt(h)) return p;
        return nullptr;
    }
};
struct no_traits : finder {};
struct no_exact : finder {
    static constexpr bool can_leave_target = true;
};
struct no_can_leave : finder {
    static constexpr bool exact = false;
};
struct contradictory : finder {
    static constexpr bool exact = true;
    static constexpr bool can_leave_target = true;
};
struct no_search {
    static constexpr bool exact = false;
    static constexpr bool can_leave_target = true;
};
struct runtime_trait : finder {
    static inline bool exact = false;   // not a constant
    static constexpr bool can_leave_target = true;
};
struct well_formed : finder {
    static constexpr bool exact = false;
    static constexpr bool can_leave_target = true;
};
struct bad_fallback : well_formed {   // looks like predicate_of, with a value that names no enumerator
    static constexpr al::start_at start = al::start_at::lookup;
    static constexpr al::stop_when stop = al::stop_when::equal;
    static constexpr al::fallback_to fallback = al::fallback_to(4);
};
struct bad_start : well_formed {
    static constexpr al::start_at start = al::start_at(-1);
};
struct bad_stop : well_formed {
    static constexpr al::stop_when stop = al::stop_when(5);
};
struct bad_accepts : well_formed {
    static void accepts(std::size_t, std::size_t) {}
};

} // namespace protocol_cases
using namespace protocol_cases;

static_assert(al::allocation_predicate<al::first_fit> && al::allocation_predicate<al::next_fit> &&
              al::allocation_predicate<al::best_fit> && al::allocation_predicate<al::worst_fit> &&
              al::allocation_predicate<al::match> && al::allocation_predicate<al::match_only> &&
              al::allocation_predicate<al::match_first> && al::allocation_predicate<al::match_last_first> &&
              al::allocation_predicate<al::nearest> && al::allocation_predicate<well_formed>);
static_assert(!al::allocation_predicate<no_traits> && !al::allocation_predicate<no_exact> &&
              !al::allocation_predicate<no_can_leave> && !al::allocation_predicate<contradictory> &&
              !al::allocation_predicate<no_search> && !al::allocation_predicate<runtime_trait> &&
              !al::allocation_predicate<int>);
static_assert(!al::allocation_predicate<bad_fallback> && !al::allocation_predicate<bad_start> &&
              !al::allocation_predicate<bad_stop> && !al::allocation_predicate<bad_accepts>);
// Derived traits of predicate_of; optional traits default to false.
static_assert(al::predicate_lookup_only<al::match_only> && !al::predicate_lookup_only<al::match_first> &&
              !al::predicate_lookup_only<al::match>);
static_assert(al::predicate_guided_walks<al::match_first> && al::predicate_guided_walks<al::match_next> &&
              !al::predicate_guided_walks<al::match_only> && !al::predicate_guided_walks<al::first_fit>);
static_assert(al::predicate_wants_sorted<al::best_fit> && !al::predicate_wants_sorted<al::first_fit>);
static_assert(!al::predicate_remembers<well_formed> && !al::predicate_lookup_only<well_formed> &&
              !al::predicate_guided_walks<well_formed> && !al::predicate_wants_sorted<well_formed>);
static_assert(!al::is_exact_match<al::nearest> && al::can_leave_target<al::nearest>);

namespace protocol_cases {
// predicate_of's searches without its declared `accepts`.
struct derived_first_fit {
    static constexpr bool exact = false;
    static constexpr bool can_leave_target = true;
    template <class C, class A>
    static std::byte* search(C& c, typename C::value_type t, A&& a) {
        return al::first_fit::search(c, t, a);
    }
};
struct derived_match {
    static constexpr bool exact = true;
    static constexpr bool can_leave_target = false;
    template <class C, class A>
    static std::byte* search(C& c, typename C::value_type t, A&& a) {
        return al::match::search(c, t, a);
    }
};
} // namespace protocol_cases

TEST_CASE("value_accepts: declared by predicate_of, derived from search otherwise", "[predicates][protocol]") {
    CHECK(al::value_accepts<al::match>(std::size_t{8}, std::size_t{8}));
    CHECK(!al::value_accepts<al::match>(std::size_t{9}, std::size_t{8}));
    CHECK(al::value_accepts<al::first_fit>(std::size_t{9}, std::size_t{8}));
    CHECK(!al::value_accepts<al::first_fit>(std::size_t{7}, std::size_t{8}));
    CHECK(al::value_accepts<al::match_first>(std::size_t{7}, std::size_t{8}));
    // nearest declares no accepts: a one-class container always serves.
    CHECK(al::value_accepts<al::nearest>(std::size_t{7}, std::size_t{8}));
    CHECK(al::value_accepts<al::nearest>(std::size_t{0}, std::size_t{1000}));
    // The derivation agrees with predicate_of's declarations.
    for (std::size_t have = 0; have < 6; ++have)
        for (std::size_t want = 0; want < 6; ++want) {
            CHECK(al::value_accepts<derived_first_fit>(have, want) == al::value_accepts<al::first_fit>(have, want));
            CHECK(al::value_accepts<derived_match>(have, want) == al::value_accepts<al::match>(have, want));
        }
}

namespace {

// An ordered test cursor (values ascending), counting how the search entered it.
struct ordered_test_cursor : test_cursor {
    std::size_t lower_bounds = 0, firsts = 0;
    handle first() noexcept {
        ++firsts;
        return test_cursor::first();
    }
    handle lower_bound(value_type v) noexcept {
        ++lower_bounds;
        for (handle h = 0; h < values.size(); ++h)
            if (values[h] >= v) return h;
        return nil;
    }
    handle prev(handle h) const noexcept {
        if (h == nil) return values.empty() ? nil : values.size() - 1;
        return h == 0 ? nil : h - 1;
    }
};
static_assert(al::bidirectional_cursor<ordered_test_cursor> && !al::ordered_cursor<test_cursor>);

template <class Pred, class Cursor>
outcome run_on(Cursor& c, unsigned target, const std::set<std::size_t>& refuse = {}) {
    outcome o;
    std::byte* p = al::search<Pred>(c, target, [&](std::size_t h) -> std::byte* {
        o.attempts.push_back(h);
        return refuse.count(h) ? nullptr : arena + h;
    });
    if (p) o.served = p - arena;
    return o;
}

} // namespace

TEST_CASE("search: fit predicates start at an ordered cursor's lower bound", "[predicates][protocol]") {
    for (auto run_fit : {+[](ordered_test_cursor& c, unsigned t, const std::set<std::size_t>& r) {
                             return run_on<al::first_fit>(c, t, r);
                         },
                         +[](ordered_test_cursor& c, unsigned t, const std::set<std::size_t>& r) {
                             return run_on<al::best_fit>(c, t, r);
                         }}) {
        ordered_test_cursor c{{{3, 5, 7, 9}}};
        auto o = run_fit(c, 6, {});
        CHECK(o.attempts == v{2});
        CHECK(c.lower_bounds == 1);
        CHECK(c.firsts == 0);   // no walk from the first class
        o = run_fit(c, 6, {2});
        CHECK(o.attempts == v{2, 3});
        o = run_fit(c, 10, {});
        CHECK(o.attempts.empty());
        CHECK(o.served == -1);
    }
    // The same predicates on the same classes without the capability: same answers.
    CHECK(run<al::first_fit>({3, 5, 7, 9}, 6, {2}).attempts == v{2, 3});
    CHECK(run<al::best_fit>({3, 5, 7, 9}, 6, {2}).attempts == v{2, 3});
    // next_fit, match and the fallbacks do not use it.
    ordered_test_cursor c{{{3, 5, 7, 9}}};
    CHECK(run_on<al::next_fit>(c, 6).attempts == v{2});
    CHECK(run_on<al::match_first>(c, 6).attempts == v{0});
    CHECK(c.lower_bounds == 0);
}

TEST_CASE("search: nearest on a cursor without capabilities", "[predicates][nearest]") {
    auto o = run<al::nearest>({10, 2, 7, 30}, 7);
    CHECK(o.attempts == v{2});   // the target itself
    o = run<al::nearest>({10, 2, 7, 30}, 8);
    CHECK(o.attempts == v{2});   // 7 is 1 away
    o = run<al::nearest>({10, 2, 6, 30}, 8);
    CHECK(o.attempts == v{2});   // 6 and 10 both 2 away: the lower
    o = run<al::nearest>({10, 2, 6, 30}, 8, {2});
    CHECK(o.attempts == v{2, 0});   // then 10, then 2
    o = run<al::nearest>({10, 2, 6, 30}, 8, {0, 2});
    CHECK(o.attempts == v{2, 0, 1});
    CHECK(o.served == 1);
    o = run<al::nearest>({10, 2, 6, 30}, 8, {0, 1, 2, 3});
    CHECK(o.attempts == v{2, 0, 1, 3});
    CHECK(o.served == -1);
    o = run<al::nearest>({}, 8);
    CHECK(o.attempts.empty());
    CHECK(o.served == -1);
    // Equal values (an element list): container order among them.
    o = run<al::nearest>({9, 5, 9, 5}, 7, {1});
    CHECK(o.attempts == v{1, 3});
    o = run<al::nearest>({0, 100}, 1000);   // far beyond every class
    CHECK(o.attempts == v{1});
}

TEST_CASE("search: nearest on a bidirectional cursor", "[predicates][nearest]") {
    ordered_test_cursor c{{{2, 6, 10, 30}}};
    CHECK(run_on<al::nearest>(c, 8).attempts == v{1});
    CHECK(c.firsts == 0);   // steps out from the lower bound, never walks from the first
    CHECK(run_on<al::nearest>(c, 8, {1}).attempts == v{1, 2});
    CHECK(run_on<al::nearest>(c, 8, {0, 1, 2}).attempts == v{1, 2, 0, 3});
    CHECK(run_on<al::nearest>(c, 6).attempts == v{1});
    CHECK(run_on<al::nearest>(c, 0).attempts == v{0});
    CHECK(run_on<al::nearest>(c, 100, {3}).attempts == v{3, 2});
    ordered_test_cursor empty{};
    CHECK(run_on<al::nearest>(empty, 8).served == -1);
}

TEST_CASE("search: nearest tries classes by (distance, value) on every cursor", "[predicates][nearest][model]") {
    std::mt19937_64 rng(15);
    for (int round = 0; round < 2000; ++round) {
        std::set<unsigned> distinct;
        const std::size_t n = rng() % 12;
        while (distinct.size() < n) distinct.insert(static_cast<unsigned>(rng() % 40));
        std::vector<unsigned> values(distinct.begin(), distinct.end());
        const unsigned target = static_cast<unsigned>(rng() % 48);
        std::set<std::size_t> refuse;
        for (std::size_t i = 0; i < values.size(); ++i)
            if (rng() % 3 == 0) refuse.insert(i);
        // Reference: every class in (distance, value) order, up to the first that serves.
        std::vector<std::size_t> order(values.size());
        std::iota(order.begin(), order.end(), std::size_t{0});
        auto dist = [&](std::size_t i) { return values[i] > target ? values[i] - target : target - values[i]; };
        std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
            return std::tuple(dist(a), values[a]) < std::tuple(dist(b), values[b]);
        });
        v expected;
        std::ptrdiff_t served = -1;
        for (std::size_t i : order) {
            expected.push_back(i);
            if (!refuse.count(i)) {
                served = static_cast<std::ptrdiff_t>(i);
                break;
            }
        }
        ordered_test_cursor ordered{{values}};
        const outcome a = run_on<al::nearest>(ordered, target, refuse);
        // The generic path sees the classes shuffled: positions differ, values do not.
        std::vector<std::size_t> perm(values.size());
        std::iota(perm.begin(), perm.end(), std::size_t{0});
        std::shuffle(perm.begin(), perm.end(), rng);
        test_cursor shuffled{};
        std::set<std::size_t> refuse_shuffled;
        for (std::size_t i = 0; i < perm.size(); ++i) {
            shuffled.values.push_back(values[perm[i]]);
            if (refuse.count(perm[i])) refuse_shuffled.insert(i);
        }
        outcome b = run_on<al::nearest>(shuffled, target, refuse_shuffled);
        for (auto& h : b.attempts) h = perm[h];
        if (b.served >= 0) b.served = static_cast<std::ptrdiff_t>(perm[static_cast<std::size_t>(b.served)]);
        INFO("round " << round << " target " << target);
        REQUIRE(a.attempts == expected);
        REQUIRE(a.served == served);
        REQUIRE(b.attempts == expected);
        REQUIRE(b.served == served);
    }
}

// ---- every container goes through the hook, with its capabilities -----------

namespace {

// Wraps a predicate: same traits, same search, and a record of the cursors it got.
struct hook_log {
    int calls = 0;
    bool ordered = false, bidirectional = false, guided = false;
};
hook_log hooks;

template <class Pred>
struct spy : Pred {
    template <class C, class A>
    static std::byte* search(C& c, typename C::value_type t, A&& a) {
        ++hooks.calls;
        hooks.ordered = al::ordered_cursor<C>;
        hooks.bidirectional = al::bidirectional_cursor<C>;
        hooks.guided = al::guided_cursor<C>;
        return Pred::search(c, t, a);
    }
};

template <class P>
hook_log one_allocation() {
    container<P> c;
    fill4(c);
    hooks = {};
    CHECK(c.take(40) >= 0);
    return hooks;
}

} // namespace

TEST_CASE("every container calls the predicate's search, with the capabilities it has", "[predicates][protocol]") {
    using sized_list = al::list<al::size, al::list<void>, spy<al::first_fit>>;
    using sized_tree = al::rb_tree<al::size, al::list<void>, spy<al::first_fit>>;
    using elements = al::list<al::size, void, spy<al::first_fit>>;
    using sorted_elements = al::list<al::size, void, spy<al::best_fit>>;
    using table = al::hash_table<al::size, al::list<void>, spy<al::first_fit>, al::pow2_bins>;

    hook_log l = one_allocation<sized_list>();
    CHECK(l.calls == 1);
    CHECK(!l.ordered);
    l = one_allocation<sized_tree>();
    CHECK(l.calls == 1);
    CHECK(l.bidirectional);
    l = one_allocation<elements>();
    CHECK(l.calls == 1);
    CHECK(!l.ordered);   // unsorted
    l = one_allocation<sorted_elements>();
    CHECK(l.calls == 1);
    CHECK(l.ordered);   // kept sorted for best fit
    CHECK(!l.bidirectional);
    l = one_allocation<table>();
    CHECK(l.calls == 1);
    CHECK(l.ordered);
    CHECK(!l.bidirectional);
    CHECK(!l.guided);
    // The size directory guides a predicate that declares guided walks.
    using vtable = al::hash_table<al::vicinity<16>, al::list<al::size, al::list<void>, al::match>,
                                  spy<al::match_first>, al::sparse_identity>;
    container<vtable> v;
    REQUIRE(vtable::prepare(v.h, v.buf.bytes, sizeof v.buf.bytes));
    v.free(0, 64);
    hooks = {};
    CHECK(v.take(64) == 0);
    CHECK(hooks.calls == 1);
    CHECK(hooks.guided);
}

TEST_CASE("list<Attr, void, Pred> from list.hpp alone: first fit and sorted best fit", "[predicates][list]") {
    SECTION("first_fit: the newest chunk that fits") {
        container<al::list<al::size, void, al::first_fit>> c;
        fill4(c);
        CHECK(c.take(40) == std::ptrdiff_t(o128));
        CHECK(c.take(40) == std::ptrdiff_t(o48));
        CHECK(c.take(40) == std::ptrdiff_t(o64));
        CHECK(c.take(40) == -1);
        CHECK(c.take(32) == std::ptrdiff_t(o32));
    }
    SECTION("best_fit: the smallest chunk that fits") {
        container<al::list<al::size, void, al::best_fit>> c;
        fill4(c);
        CHECK(c.take(40) == std::ptrdiff_t(o48));
        CHECK(c.take(40) == std::ptrdiff_t(o64));
        CHECK(c.take(1) == std::ptrdiff_t(o32));
        CHECK(c.take(129) == -1);
        CHECK(c.take(128) == std::ptrdiff_t(o128));
        CHECK(c.take(1) == -1);
    }
}

// ---- nearest inside containers ---------------------------------------------

namespace {

// A test attribute: the 1 KiB block of `blocks` a chunk lies in; a request
// names its block by its hint. Width 6: 64 blocks.
constexpr std::size_t block_bytes = 1024, block_count = 64, chunk_bytes = 128;
constexpr std::size_t chunks_per_block = block_bytes / chunk_bytes;
alignas(block_bytes) std::byte blocks[block_count * block_bytes];

struct block_of {
    using value_type = std::size_t;
    static constexpr bool is_explicit = false;
    static constexpr bool from_address = true;
    static constexpr std::size_t stored_bytes = 0;
    static constexpr unsigned width = 6;
    static value_type of_chunk(const std::byte* p, std::size_t) noexcept {
        return static_cast<std::size_t>(p - blocks) / block_bytes;
    }
    template <al::request_like R>
    static value_type of_request(const R& r) noexcept {
        return r.hint ? of_chunk(static_cast<const std::byte*>(r.hint), 0) : 0;
    }
};
static_assert(al::address_attribute<block_of> && al::bounded_attribute<block_of>);

std::byte* chunk_at(std::size_t block, std::size_t k) { return blocks + block * block_bytes + k * chunk_bytes; }

template <class P>
struct block_container {
    union {   // constructed and destroyed by P::init / P::destroy only
        typename P::header_type h;
    };
    block_container() {
        P::init(h);
        REQUIRE(P::prepare(h, blocks, sizeof blocks));
    }
    ~block_container() { P::destroy(h); }
    void free(std::size_t block, std::size_t k = 0) { P::deallocate(h, chunk_at(block, k), chunk_bytes); }
    // The block the chunk served for a request near `hint_block` lies in; -1: none.
    std::ptrdiff_t take_near(std::size_t hint_block) {
        std::byte* p = P::allocate(h, al::request{chunk_bytes, chunk_at(hint_block, 0), 0});
        return p ? static_cast<std::ptrdiff_t>(block_of::of_chunk(p, 0)) : -1;
    }
};

using nearest_list = al::list<block_of, al::list<void>, al::nearest>;
using nearest_tree = al::rb_tree<block_of, al::list<void>, al::nearest>;
using nearest_table = al::hash_table<block_of, al::list<void>, al::nearest, al::dense_identity>;
static_assert(nearest_list::address_safe && nearest_tree::address_safe && nearest_table::address_safe,
              "nearest may leave the target: accepted on an address attribute");

template <class P>
void nearest_placement() {
    block_container<P> c;
    c.free(5);
    c.free(10);
    c.free(20);
    c.free(20, 1);
    c.free(40);
    CHECK(c.take_near(20) == 20);   // the hint's own block
    CHECK(c.take_near(14) == 10);   // 4 below rather than 6 above
    CHECK(c.take_near(16) == 20);   // 4 above rather than 11 below
    c.free(25);
    CHECK(c.take_near(15) == 5);    // 10 below, 10 above: the lower block
    CHECK(c.take_near(63) == 40);
    CHECK(c.take_near(0) == 25);    // far away, but the only one left
    CHECK(c.take_near(0) == -1);
    c.free(63, 7);
    CHECK(c.take_near(0) == 63);
}

template <class P>
void nearest_model(std::uint64_t seed) {
    block_container<P> c;
    std::mt19937_64 rng(seed);
    std::map<std::size_t, std::set<std::size_t>> free_chunks;   // block -> chunk numbers
    std::set<std::pair<std::size_t, std::size_t>> taken;        // (block, chunk) handed out
    for (std::size_t b = 0; b < block_count; ++b)
        for (std::size_t k = 0; k < chunks_per_block; ++k) taken.insert({b, k});
    for (int step = 0; step < 20000; ++step) {
        const bool give_back = !taken.empty() && (free_chunks.empty() || rng() % 2 == 0);
        if (give_back) {
            auto it = std::next(taken.begin(), static_cast<std::ptrdiff_t>(rng() % taken.size()));
            c.free(it->first, it->second);
            free_chunks[it->first].insert(it->second);
            taken.erase(it);
            continue;
        }
        const std::size_t hint = rng() % block_count;
        std::byte* p = P::allocate(c.h, al::request{chunk_bytes, chunk_at(hint, 0), 0});
        INFO("step " << step << " hint block " << hint);
        if (free_chunks.empty()) {
            REQUIRE(p == nullptr);
            continue;
        }
        // The nearest non-empty block, the lower one on a tie.
        std::size_t want = 0, best = block_count;
        for (const auto& [b, ks] : free_chunks) {
            const std::size_t d = b > hint ? b - hint : hint - b;
            if (d < best) {
                best = d;
                want = b;
            }
        }
        REQUIRE(p != nullptr);
        const std::size_t off = static_cast<std::size_t>(p - blocks);
        const std::size_t b = off / block_bytes, k = off % block_bytes / chunk_bytes;
        REQUIRE(off % chunk_bytes == 0);
        REQUIRE(b == want);
        REQUIRE(free_chunks[b].count(k) == 1);   // a free chunk, handed out once
        free_chunks[b].erase(k);
        if (free_chunks[b].empty()) free_chunks.erase(b);
        taken.insert({b, k});
    }
}

} // namespace

TEST_CASE("nearest in a list: placement", "[predicates][nearest][list]") { nearest_placement<nearest_list>(); }
TEST_CASE("nearest in an rb_tree: placement", "[predicates][nearest][rb_tree]") { nearest_placement<nearest_tree>(); }
TEST_CASE("nearest in a hash_table: placement", "[predicates][nearest][hash_table]") {
    nearest_placement<nearest_table>();
}
TEST_CASE("nearest in a list: model", "[predicates][nearest][list][model]") { nearest_model<nearest_list>(1); }
TEST_CASE("nearest in an rb_tree: model", "[predicates][nearest][rb_tree][model]") { nearest_model<nearest_tree>(2); }
TEST_CASE("nearest in a hash_table: model", "[predicates][nearest][hash_table][model]") {
    nearest_model<nearest_table>(3);
}

// ---- bounded<Pred, K>: Pred's order, at most K classes shown ------------------

static_assert(al::allocation_predicate<al::bounded<al::first_fit, 1>> &&
              al::allocation_predicate<al::bounded<al::nearest, 4>>);
static_assert(al::can_leave_target<al::bounded<al::first_fit, 8>> && !al::is_exact_match<al::bounded<al::first_fit, 8>>);
static_assert(al::is_exact_match<al::bounded<al::match_only, 8>> && al::predicate_lookup_only<al::bounded<al::match_only, 8>>);
static_assert(al::predicate_remembers<al::bounded<al::next_fit, 8>>);
static_assert(al::predicate_wants_sorted<al::bounded<al::best_fit, 8>>);
// A truncated walk must not feed a walk memo: the adaptor never resumes walks.
static_assert(al::predicate_guided_walks<al::match_first> && !al::predicate_guided_walks<al::bounded<al::match_first, 8>>);

TEST_CASE("bounded: first fit over the first K classes, the rest unseen (property)", "[predicates][bounded][model]") {
    std::mt19937_64 rng(16);
    auto check = [&](auto k_constant) {
        constexpr std::size_t K = decltype(k_constant)::value;
        for (int round = 0; round < 500; ++round) {
            std::vector<unsigned> values(rng() % 40);
            for (auto& x : values) x = static_cast<unsigned>(rng() % 100);
            const unsigned target = static_cast<unsigned>(rng() % 100);
            std::set<std::size_t> refuse;
            for (std::size_t h = 0; h < values.size(); ++h)
                if (rng() % 4 == 0) refuse.insert(h);
            const outcome all = run<al::first_fit>(values, target, refuse);
            const outcome some = run<al::bounded<al::first_fit, K>>(values, target, refuse);
            // The classes a test_cursor hands out first are 0, 1, ...: the
            // bounded search attempts exactly the unbounded one's attempts below K.
            std::vector<std::size_t> expected;
            for (std::size_t h : all.attempts)
                if (h < K) expected.push_back(h);
            REQUIRE(some.attempts == expected);
            REQUIRE(some.served == (all.served >= 0 && static_cast<std::size_t>(all.served) < K ? all.served : -1));
        }
    };
    check(std::integral_constant<std::size_t, 1>{});
    check(std::integral_constant<std::size_t, 3>{});
    check(std::integral_constant<std::size_t, 16>{});
}

TEST_CASE("bounded: no predicate is shown more than K classes", "[predicates][bounded]") {
    constexpr std::size_t K = 5;
    std::mt19937_64 rng(17);
    for (int round = 0; round < 300; ++round) {
        std::vector<unsigned> values(rng() % 30);
        for (auto& x : values) x = static_cast<unsigned>(rng() % 50);
        const unsigned target = static_cast<unsigned>(rng() % 50);
        std::set<std::size_t> refuse_all;
        for (std::size_t h = 0; h < values.size(); ++h) refuse_all.insert(h);   // every class refuses: longest walks
        const std::size_t last = values.empty() ? test_cursor::nil : rng() % values.size();
        CHECK(run<al::bounded<al::any, K>>(values, target, refuse_all).attempts.size() <= K);
        CHECK(run<al::bounded<al::best_fit, K>>(values, target, refuse_all).attempts.size() <= K);
        CHECK(run<al::bounded<al::worst_fit, K>>(values, target, refuse_all).attempts.size() <= K);
        CHECK(run<al::bounded<al::next_fit, K>>(values, target, refuse_all, last).attempts.size() <= K);
        CHECK(run<al::bounded<al::match_first, K>>(values, target, refuse_all).attempts.size() <= K);
        CHECK(run<al::bounded<al::nearest, K>>(values, target, refuse_all).attempts.size() <= K);
        // And a bound larger than the container changes nothing.
        const outcome all = run<al::best_fit>(values, target, refuse_all);
        CHECK(run<al::bounded<al::best_fit, 1000>>(values, target, refuse_all).attempts == all.attempts);
    }
}

TEST_CASE("bounded: an ordered cursor's capabilities pass through", "[predicates][bounded][protocol]") {
    ordered_test_cursor c;
    c.values = {1, 3, 5, 7, 9, 11, 13};
    // first_fit starts at the lower bound (not at the first class) and sees K classes from there.
    const outcome o = run_on<al::bounded<al::first_fit, 2>>(c, 6, {3, 4});
    CHECK(c.lower_bounds == 1u);
    CHECK(c.firsts == 0u);
    CHECK(o.attempts == v{3, 4});
    CHECK(o.served == -1);
    // nearest steps outwards with prev/lower_bound: 5 and 7 first, then 3 and 9.
    ordered_test_cursor d;
    d.values = c.values;
    CHECK(run_on<al::bounded<al::nearest, 3>>(d, 6, {2, 3, 1}).attempts == v{2, 3, 1});
    CHECK(run_on<al::bounded<al::nearest, 4>>(d, 6, {2, 3, 1}).served == 4);
}
