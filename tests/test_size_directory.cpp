// size_directory (containers/size_directory.hpp) against a std::set reference
// per size under random note / forget / next / may_hold / lacks_at_a_glance /
// clear, at the widths Medius (2^16 classes) and Velox (2^31 classes, sparse
// leaves) use and one below a leaf; plus its defined answers to sizes it does
// not index and to running out of leaves.
#include "catch.hpp"

#include <allotheque/containers/size_directory.hpp>

#include <cstddef>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <vector>

namespace al = allotheque;

namespace {

constexpr std::size_t npos = al::detail::npos;

std::size_t ref_next(const std::set<std::size_t>& s, std::size_t from) {
    auto it = s.lower_bound(from);
    return it == s.end() ? npos : *it;
}

// Classes drawn from a few clusters (as a heap's vicinities are), so leaves
// and bitmap words fill and empty; sizes from a small set plus the extremes.
// Direct: the directory's leaves each have a slot (2^16 classes and fewer),
// so lacks_at_a_glance is exact there.
template <unsigned Bits, bool Direct>
void directory_against_sets(std::size_t ops, unsigned seed) {
    auto d = std::make_unique<al::size_directory<Bits>>();
    std::map<std::size_t, std::set<std::size_t>> ref;   // size -> classes
    std::mt19937_64 rng(seed);
    constexpr std::size_t classes = std::size_t{1} << Bits;
    std::vector<std::size_t> centres;
    for (int i = 0; i < 6; ++i) centres.push_back(rng() % classes);
    centres.push_back(0);
    centres.push_back(classes - 1);
    const std::vector<std::size_t> sizes = {8, 16, 32, 544, 4096, al::size_directory<Bits>::max_size};
    auto pick_class = [&] {
        const std::size_t c = centres[rng() % centres.size()];
        const std::size_t spread = rng() % 3 == 0 ? 70000 : 200;
        const std::size_t off = rng() % (2 * spread + 1);
        const std::size_t v = c + off >= spread ? c + off - spread : 0;
        return v < classes ? v : classes - 1;
    };
    // A class, and half the time (when there is one) the noted class at or
    // after it, the first one past the end.
    auto pick_often_noted = [&](const std::set<std::size_t>& r) {
        const std::size_t c = pick_class();
        if (r.empty() || rng() % 2 == 0) return c;
        const std::size_t at = ref_next(r, c);
        return at == npos ? *r.begin() : at;
    };
    for (std::size_t k = 0; k < ops; ++k) {
        const std::size_t s = sizes[rng() % sizes.size()];
        REQUIRE(d->vouches(s));
        const unsigned op = rng() % 16;
        if (op < 6) {
            const std::size_t c = pick_class();
            d->note(s, c);
            ref[s].insert(c);
        } else if (op < 10) {
            // Forget a noted class when there is one (a search finding it empty).
            auto& r = ref[s];
            const std::size_t c = pick_often_noted(r);
            d->forget(s, c);
            r.erase(c);
        } else if (op < 13) {
            const std::size_t from = rng() % 4 == 0 ? 0 : pick_class();
            REQUIRE(d->next(s, from) == ref_next(ref[s], from));
        } else if (op < 15) {
            // One class's bit, asked directly: a noted class half the time,
            // so that both answers are checked at every bit of a word.
            const auto& r = ref[s];
            const std::size_t c = pick_often_noted(r);
            const bool held = r.count(c) > 0;
            REQUIRE(d->may_hold(s, c) == held);
            // "Lacks" is never said of a class that holds the size; where every
            // leaf has a slot (direct) the glance always answers.
            if (held) REQUIRE_FALSE(d->lacks_at_a_glance(s, c));
            if (Direct) REQUIRE(d->lacks_at_a_glance(s, c) == !held);
        } else if (rng() % 500 == 0) {
            // Both clears: the pages given back, or the rows in use zeroed.
            d->clear(rng() % 2 == 0);
            ref.clear();
        }
    }
    // Every size walked end to end, then next_present forgetting what is absent.
    for (const std::size_t s : sizes) {
        auto& r = ref[s];
        std::size_t at = d->next(s, 0);
        for (const std::size_t c : r) {
            REQUIRE(at == c);
            at = d->next(s, c + 1);
        }
        REQUIRE(at == npos);
        // Classes with an odd number "no longer exist": skipped and forgotten.
        std::set<std::size_t> even;
        for (const std::size_t c : r)
            if (c % 2 == 0) even.insert(c);
        std::size_t found = d->next_present(s, 0, [](std::size_t c) { return c % 2 == 0; });
        for (const std::size_t c : even) {
            REQUIRE(found == c);
            found = d->next_present(s, c + 1, [](std::size_t c2) { return c2 % 2 == 0; });
        }
        REQUIRE(found == npos);
        REQUIRE(d->next(s, 0) == ref_next(even, 0));
    }
}

} // namespace

TEST_CASE("size_directory<16> (Medius' classes) against std::set", "[size_directory]") {
    directory_against_sets<16, true>(200000, 1);
}
TEST_CASE("size_directory<31> (Velox' classes, sparse leaves) against std::set", "[size_directory]") {
    directory_against_sets<31, false>(200000, 2);
}
TEST_CASE("size_directory<6> (one leaf smaller than 4096 classes) against std::set", "[size_directory]") {
    directory_against_sets<6, true>(50000, 3);
}

TEST_CASE("size_directory: sizes it does not index are not vouched for, and notes of them change nothing",
          "[size_directory]") {
    auto d = std::make_unique<al::size_directory<16>>();
    using dir = al::size_directory<16>;
    for (const std::size_t s : {std::size_t{0}, std::size_t{12}, std::size_t{100}, dir::max_size + 8,
                                dir::max_size * 4, std::size_t{1} << 40})
        CHECK(d->vouches(s) == (s % dir::step == 0 && s <= dir::max_size));
    d->note(12, 5);
    d->note(dir::max_size + 8, 5);
    d->forget(100, 5);
    CHECK(d->metadata_bytes() == 0);   // no leaf was mapped for them
    d->note(16, 5);
    CHECK(d->metadata_bytes() > 0);
    CHECK(d->next(16, 0) == 5);
    CHECK(d->next(16, 6) == npos);
    CHECK(d->next(24, 0) == npos);
    // Forgetting a class whose leaf was never mapped is a no-op.
    d->forget(16, 60000);
    CHECK(d->next(16, 0) == 5);
}

TEST_CASE("size_directory: out of leaves it stops vouching, and keeps what it had", "[size_directory]") {
    auto d = std::make_unique<al::size_directory<31>>();
    // One class in each of max_leaves + 1 leaves (4096 classes per leaf).
    constexpr std::size_t leaves = 256;
    for (std::size_t l = 0; l < leaves; ++l) d->note(64, l << 12);
    CHECK(d->vouches(64));
    CHECK(d->next(64, (std::size_t{100} << 12) + 1) == std::size_t{101} << 12);
    d->note(64, leaves << 12);
    CHECK_FALSE(d->vouches(64));
    CHECK_FALSE(d->vouches(32));
    // A clear keeps the leaves, so the directory still cannot vouch.
    d->clear();
    CHECK_FALSE(d->vouches(64));
    CHECK(d->next(64, 0) == npos);
}

TEST_CASE("size_directory: clear forgets every bit and keeps working", "[size_directory]") {
    const bool give_back = GENERATE(false, true);
    CAPTURE(give_back);
    auto d = std::make_unique<al::size_directory<16>>();
    for (std::size_t c = 0; c < 65536; c += 1000) d->note(32, c);
    d->note(al::size_directory<16>::max_size, 7);
    CHECK(d->next(32, 1) == 1000);
    d->clear(give_back);
    CHECK(d->vouches(32));
    CHECK(d->next(32, 0) == npos);
    CHECK(d->next(al::size_directory<16>::max_size, 0) == npos);
    d->note(32, 65535);
    CHECK(d->next(32, 0) == 65535);
    // A second clear zeroes what was noted since the first.
    d->clear(give_back);
    CHECK(d->next(32, 0) == npos);
}
