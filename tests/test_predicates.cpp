// Allocation predicates: the generic search over a test cursor (which class is
// attempted first, the fallback order, refusals continuing the walk), then the
// same predicates inside real containers (list, rb_tree) fed chunks by hand.
#include "catch.hpp"

#include <allotheque/attributes/size.hpp>
#include <allotheque/containers/list.hpp>
#include <allotheque/containers/rb_tree.hpp>
#include <allotheque/containers/search.hpp>
#include <allotheque/predicates/fits.hpp>
#include <allotheque/predicates/match.hpp>

#include <algorithm>
#include <cstddef>
#include <set>
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
    typename P::header_type h;
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
