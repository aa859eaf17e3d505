// hash_table keeps the last free aside (containers/hash_table.hpp) when its
// predicate takes the last free (match_last_first) and its classes return the
// chunk freed last, and it serves each size's run in one class from that
// size's front entry (also when the search would pass over the hint's class
// and the class used last to the lowest class holding the size, where the
// entry says so). Neither may change placement: the same operations on the same layout
// give the same chunks as a table that links every free at once and always
// searches.
// Two tables, one of each, run random allocations (with and without hints),
// frees, range frees, drains with re-insertion and emptiness checks over two
// buffers with the same layout, and must agree on every answer; a model of the
// free chunks checks that neither hands out a live chunk, and every live
// chunk's contents are checked when it is freed. Velox over tables of size
// classes is also run against the rule itself, kept naively (velox_rule).
#include "catch.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <vector>

#include <allotheque/allocators/medius.hpp>
#include <allotheque/allocators/velox.hpp>

namespace al = allotheque;

namespace {

// match_last_first, minus the permission to keep a free aside.
struct linked_match_last_first : al::match_last_first {
    static constexpr bool takes_last_free = false;
};

template <class Attr, class Hash>
using held_table = al::hash_table<Attr, al::list<al::size, al::list<void>, al::match>, al::match_last_first, Hash>;
template <class Attr, class Hash>
using linked_table =
    al::hash_table<Attr, al::list<al::size, al::list<void>, al::match>, linked_match_last_first, Hash>;

using velox_held = held_table<al::vicinity<16>, al::sparse_identity>;
using velox_linked = linked_table<al::vicinity<16>, al::sparse_identity>;
using medius_held = held_table<al::skbit<12, 16>, al::dense_identity>;
using medius_linked = linked_table<al::skbit<12, 16>, al::dense_identity>;

static_assert(velox_held::holds_last_free && medius_held::holds_last_free);
static_assert(!velox_linked::holds_last_free && !medius_linked::holds_last_free);
// The holding tables also keep a front (a run of one size in one class goes
// straight to that size's chunks); the linked ones do not, so every
// comparison below checks the front's answers too.
static_assert(velox_held::has_front && medius_held::has_front);
static_assert(!velox_linked::has_front && !medius_linked::has_front);
// Velox and Medius are built on the holding tables.
static_assert(al::velox_partition<>::holds_last_free && al::medius_partition<>::holds_last_free);
// Velox over the segregated heap's classes: a table of sizes in each class, no
// held chunk and no per-size entries of the list's kind (its own front per size).
static_assert(al::velox_classed_partition<>::sized && !al::velox_classed_partition<>::holds_last_free);
static_assert(!velox_held::sized && !medius_held::sized);
// A span's chunks have one stack where a size's stack in a class stays its
// own (Velox' tables of sizes); Medius' ways hand stacks between sizes.
static_assert(al::velox_classed_partition<>::keeps_span_chunks &&
              !al::medius_classed_partition<>::keeps_span_chunks && !velox_held::keeps_span_chunks);
// Not over sizes, nor with a predicate that does not fall back to the last free.
static_assert(!al::hash_table<al::vicinity<16>, al::list<al::size, al::list<void>, al::match>, al::match_first,
                              al::sparse_identity>::holds_last_free);

constexpr std::size_t page = 4096;
constexpr std::size_t region = 128 * page;
// Aligned so that both buffers fall on the same classes' boundaries (skbit
// reads address bits up to 28, a sparse leaf spans 2^28 bytes).
constexpr std::size_t alignment = std::size_t{1} << 28;

struct buffer {
    void* reserved = nullptr;
    std::size_t reserved_bytes = 2 * alignment;
    std::byte* base = nullptr;
    buffer() {
        reserved = ::mmap(nullptr, reserved_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                          -1, 0);
        REQUIRE(reserved != MAP_FAILED);
        const auto a = reinterpret_cast<std::uintptr_t>(reserved);
        base = reinterpret_cast<std::byte*>((a + alignment - 1) & ~(alignment - 1));
    }
    ~buffer() { ::munmap(reserved, reserved_bytes); }
    buffer(const buffer&) = delete;
    buffer& operator=(const buffer&) = delete;
};

template <class P>
struct table {
    buffer mem;
    union {   // built by P::init and destroyed by P::destroy only, as a heap's root is
        typename P::header_type h;
    };
    table() {
        P::init(h);
        REQUIRE(P::prepare(h, mem.base, region));
    }
    ~table() { P::destroy(h); }
    table(const table&) = delete;
    table& operator=(const table&) = delete;
    std::byte* at(std::size_t off) { return mem.base + off; }
    std::size_t offset(const std::byte* p) const { return static_cast<std::size_t>(p - mem.base); }
};

// ExactOrder: the two also agree on which chunk of a class a range free puts
// on top, and on the order a drain hands the chunks out. A table of sizes
// (velox_classed_partition) keeps a class's chunks of a size in one stack,
// where a list of sizes makes the first chunk into an empty class the class's
// host, handed out last: single frees place alike (a stack's bottom is its
// first push), a range free into a class without the size does not.
// NullHints: some requests carry no hint. A table of sizes (under
// match_last_first) sends those to the class their size used last, the list
// of sizes to the class used last: they are compared on hinted requests.
template <class Held, class Linked, bool ExactOrder = true, bool NullHints = true>
void same_placement(unsigned seed, std::size_t ops) {
    table<Held> a;
    table<Linked> b;
    std::mt19937_64 rng(seed);
    // A chunk must hold a class node (a heap rounds sizes up to min_chunk).
    static_assert(Held::min_chunk <= 32 && Linked::min_chunk <= 32);
    const std::vector<std::size_t> sizes = {32, 48, 64, 96, 128, 256, 512};
    std::vector<std::size_t> page_size(region / page);
    for (auto& s : page_size) s = sizes[rng() % sizes.size()];

    std::set<std::size_t> free_set;              // offsets of free chunks
    std::map<std::size_t, std::uint64_t> live;   // offset -> stamp written into the chunk
    auto chunk_size = [&](std::size_t off) { return page_size[off / page]; };

    // Every page's chunks start free, the lowest on top (as a refill leaves
    // them): one by one, the highest first, and where the two order a range
    // alike, one range for the table under test (a heap's refill).
    for (std::size_t pg = 0; pg < page_size.size(); ++pg) {
        const std::size_t s = page_size[pg];
        if constexpr (ExactOrder) al::deallocate_range_in<Held>(a.h, a.at(pg * page), page / s, s);
        for (std::size_t k = page / s; k-- > 0;) {
            const std::size_t off = pg * page + k * s;
            if constexpr (!ExactOrder) Held::deallocate(a.h, a.at(off), s);
            Linked::deallocate(b.h, b.at(off), s);
            free_set.insert(off);
        }
    }

    std::uint64_t stamp = 1;
    auto write = [&](std::size_t off) {
        const std::size_t s = chunk_size(off);
        for (std::size_t w = 0; w < s / 8; ++w) {
            std::memcpy(a.at(off) + 8 * w, &stamp, 8);
            std::memcpy(b.at(off) + 8 * w, &stamp, 8);
        }
        live[off] = stamp++;
    };
    auto check_and_forget = [&](std::size_t off) {
        const std::size_t s = chunk_size(off);
        bool intact = true;
        for (std::size_t w = 0; w < s / 8; ++w) {
            std::uint64_t x = 0, y = 0;
            std::memcpy(&x, a.at(off) + 8 * w, 8);
            std::memcpy(&y, b.at(off) + 8 * w, 8);
            intact = intact && x == live[off] && y == live[off];
        }
        REQUIRE(intact);
        live.erase(off);
        free_set.insert(off);
    };
    auto random_live = [&] {
        auto it = live.begin();
        std::advance(it, static_cast<long>(rng() % live.size()));
        return it->first;
    };

    std::optional<std::size_t> recent;   // the chunk allocated last
    // Most chunks live, so that classes empty and fill again (where a free is
    // held) and the class used last often lacks the size asked for.
    const std::size_t chunks = free_set.size();
    for (std::size_t op = 0; op < ops; ++op) {
        const unsigned dice = static_cast<unsigned>(rng() % 100);
        const unsigned allocations = free_set.size() * 20 > chunks ? 70 : 45;
        if (dice < allocations || live.empty()) {
            // A third of the time, a run: the size and the hint of the
            // allocation before (what "near the previous one" gives a loop
            // allocating one size), which the front serves.
            const bool run = recent.has_value() && live.count(*recent) && rng() % 3 == 0;
            const std::size_t s = run ? chunk_size(*recent) : sizes[rng() % sizes.size()];
            const bool hinted = !NullHints || run || rng() % 10 < 7;
            // Hints near live blocks mostly (what "near the previous one" gives),
            // and a quarter of the others at the block allocated before, of
            // another size (what a malloc's hint is under mixed sizes: on
            // Medius' one-size pages its class lacks the size, and the search
            // walks to the lowest class holding it, where the entry points).
            const bool previous = recent.has_value() && rng() % 4 == 0;
            const std::size_t hint_off = run || previous ? *recent
                                         : !live.empty() && rng() % 2 ? random_live()
                                                                      : rng() % region;
            al::request ra{s, hinted ? a.at(hint_off) : nullptr};
            al::request rb{s, hinted ? b.at(hint_off) : nullptr};
            std::byte* p = Held::allocate(a.h, ra);
            std::byte* q = Linked::allocate(b.h, rb);
            REQUIRE((p == nullptr) == (q == nullptr));
            if (!p) continue;
            const std::size_t off = a.offset(p);
            REQUIRE(off == b.offset(q));
            REQUIRE(free_set.erase(off) == 1);   // a free chunk, never a live one
            REQUIRE(chunk_size(off) == s);
            write(off);
            recent = off;
        } else if (dice < 93) {
            // A third of the time the newest live chunk first (a LIFO run of
            // frees goes into one class, which the front serves too).
            auto newest = std::max_element(live.begin(), live.end(),
                                           [](const auto& x, const auto& y) { return x.second < y.second; });
            const std::size_t off = rng() % 3 == 0 ? newest->first : random_live();
            check_and_forget(off);
            Held::deallocate(a.h, a.at(off), chunk_size(off));
            Linked::deallocate(b.h, b.at(off), chunk_size(off));
        } else if (dice < 95 && ExactOrder) {
            // Consecutive live chunks of one page as one range (how a refill
            // hands a span's chunks over) for the table under test, one by
            // one from the highest for the other.
            const std::size_t first = random_live(), s = chunk_size(first);
            std::size_t k = 1;
            while (k < 8 && (first + k * s) / page == first / page && live.count(first + k * s)) ++k;
            for (std::size_t j = 0; j < k; ++j) check_and_forget(first + j * s);
            al::deallocate_range_in<Held>(a.h, a.at(first), k, s);
            for (std::size_t j = k; j-- > 0;) Linked::deallocate(b.h, b.at(first + j * s), s);
        } else if (dice < 97 && ExactOrder) {
            // A range free: live chunks of one size, in address order.
            const std::size_t s = chunk_size(random_live());
            std::vector<std::byte*> ra, rb;
            for (auto it = live.begin(); it != live.end() && ra.size() < 12;) {
                const std::size_t off = it->first;
                ++it;
                if (chunk_size(off) != s || rng() % 3 != 0) continue;
                check_and_forget(off);
                ra.push_back(a.at(off));
                rb.push_back(b.at(off));
            }
            if (ra.empty()) continue;
            al::deallocate_run_in<Held>(a.h, ra.data(), ra.size(), s);
            al::deallocate_run_in<Linked>(b.h, rb.data(), rb.size(), s);
        } else if (dice < 99) {
            // What a heap's sweep does: take every chunk out, put them back.
            std::vector<std::size_t> da, db;
            Held::drain(a.h, [&](std::byte* p) { da.push_back(a.offset(p)); });
            Linked::drain(b.h, [&](std::byte* p) { db.push_back(b.offset(p)); });
            if constexpr (ExactOrder) REQUIRE(da == db);
            std::sort(da.begin(), da.end());
            std::sort(db.begin(), db.end());
            REQUIRE(da == db);
            REQUIRE(std::vector<std::size_t>(free_set.begin(), free_set.end()) == da);
            REQUIRE(Held::empty(a.h));
            for (std::size_t off : da) {
                Held::deallocate(a.h, a.at(off), chunk_size(off));
                Linked::deallocate(b.h, b.at(off), chunk_size(off));
            }
        } else {
            REQUIRE(Held::empty(a.h) == free_set.empty());
            REQUIRE(Linked::empty(b.h) == free_set.empty());
        }
    }
    // Everything back, then drained: both hold exactly the free chunks.
    while (!live.empty()) {
        const std::size_t off = live.begin()->first;
        check_and_forget(off);
        Held::deallocate(a.h, a.at(off), chunk_size(off));
        Linked::deallocate(b.h, b.at(off), chunk_size(off));
    }
    std::vector<std::size_t> da;
    Held::drain(a.h, [&](std::byte* p) { da.push_back(a.offset(p)); });
    std::sort(da.begin(), da.end());
    REQUIRE(std::vector<std::size_t>(free_set.begin(), free_set.end()) == da);
    Linked::clear(b.h);
}

} // namespace

TEST_CASE("Velox's table places as if it linked every free", "[held_free]") {
    for (unsigned seed = 1; seed <= 4; ++seed) same_placement<velox_held, velox_linked>(seed, 20000);
}

TEST_CASE("Velox over size classes places as the list of sizes does", "[held_free]") {
    // The search's order (target's class, class used last, lowest class
    // holding the size) over a table of each class's sizes, with its front
    // and its per-size bound, against the plain linked list of sizes.
    using classed = al::velox_classed_partition<>;
    for (unsigned seed = 1; seed <= 4; ++seed) same_placement<classed, velox_linked, false, false>(seed, 20000);
}

TEST_CASE("Medius's table places as if it linked every free", "[held_free]") {
    for (unsigned seed = 1; seed <= 4; ++seed) same_placement<medius_held, medius_linked>(seed, 20000);
}

TEST_CASE("a free then an allocation of its size gets the chunk back", "[held_free]") {
    // Steady churn, the case the held chunk is for: the chunk comes back, and
    // a clear forgets it like every other free chunk.
    table<medius_held> t;
    const std::size_t s = 64;
    for (std::size_t k = page / s; k-- > 0;) medius_held::deallocate(t.h, t.at(k * s), s);
    std::vector<std::byte*> taken;
    while (std::byte* p = medius_held::allocate(t.h, al::request{s, t.at(0)})) taken.push_back(p);
    REQUIRE(taken.size() == page / s);
    REQUIRE(medius_held::empty(t.h));
    for (int round = 0; round < 100; ++round) {
        std::byte* p = taken[static_cast<std::size_t>(round * 7) % taken.size()];
        medius_held::deallocate(t.h, p, s);
        REQUIRE_FALSE(medius_held::empty(t.h));
        REQUIRE(medius_held::allocate(t.h, al::request{s, t.at(page)}) == p);
        REQUIRE(medius_held::empty(t.h));
    }
    medius_held::deallocate(t.h, taken[0], s);
    medius_held::clear(t.h);
    REQUIRE(medius_held::empty(t.h));
    REQUIRE(medius_held::allocate(t.h, al::request{s, nullptr}) == nullptr);
}

namespace {

// The rule itself, kept naively: per (class, size) a stack of free chunks;
// an allocation pops from the hint's class (no hint: the class its size was
// last taken from or freed into, else the class used last), else from the
// class used last, else from the lowest class holding the size (an
// allocation that finds nothing forgets where its size was); a free pushes and makes its class the last used; a range free of one
// size pushes each same-class run so that its first chunk ends on top.
// Without `remembers` (match_first) there is no class used last: the hint's,
// else the lowest. With `per_size` (match_size_last_first) the class used
// last is the one the size was last taken from or freed into, and no class
// any size touched last is kept: no hint, that class, else the lowest; a
// hint, its class, else that one, else the lowest. A class is address bits [shift, shift + bits): Velox'
// vicinities are bits 16 and up, Medius' pages bits [12, 28).
struct velox_rule {
    static constexpr std::size_t none = ~std::size_t{0};
    std::map<std::size_t, std::map<std::size_t, std::vector<std::size_t>>> stacks;   // class -> size -> offsets
    bool remembers = true;
    bool per_size = false;
    std::size_t last = none;
    std::map<std::size_t, std::size_t> size_last;   // size -> the class it was last taken from or freed into
    std::uintptr_t base = 0;
    unsigned shift = 16;
    unsigned bits = 48;
    std::size_t vicinity(std::size_t off) const { return ((base + off) >> shift) & ((std::size_t{1} << bits) - 1); }
    // The chunk a table took instead of `want`, from want's class and stack
    // (a table that spills keeps a size's chunks of a class in two stacks).
    void took_instead(std::size_t want, std::size_t got, std::size_t s) {
        auto& z = stacks[vicinity(want)][s];
        auto it = std::find(z.begin(), z.end(), got);
        REQUIRE(it != z.end());
        *it = want;
    }

    std::optional<std::size_t> allocate(std::size_t s, std::optional<std::size_t> hint) {
        const auto remembered = size_last.find(s);
        const std::size_t t = hint                                          ? vicinity(*hint)
                              : remembers && remembered != size_last.end() ? remembered->second
                              : per_size                                    ? none
                                                                            : last;
        const std::size_t second = !per_size                     ? last
                                   : remembered != size_last.end() ? remembered->second
                                                                   : none;
        auto taken = allocate_from(s, t, second);
        if (taken) size_last[s] = vicinity(*taken);
        else size_last.erase(s);
        return taken;
    }
    std::optional<std::size_t> allocate_from(std::size_t s, std::size_t t, std::size_t second) {
        auto pop = [&](std::size_t v) -> std::optional<std::size_t> {
            auto c = stacks.find(v);
            if (c == stacks.end()) return std::nullopt;
            auto z = c->second.find(s);
            if (z == c->second.end() || z->second.empty()) return std::nullopt;
            const std::size_t off = z->second.back();
            z->second.pop_back();
            if (remembers) last = v;
            return off;
        };
        if (t != none)
            if (auto off = pop(t)) return off;
        if (second != none && second != t)
            if (auto off = pop(second)) return off;
        for (auto& [v, sizes] : stacks)
            if (auto z = sizes.find(s); z != sizes.end() && !z->second.empty()) return pop(v);
        return std::nullopt;
    }
    void deallocate(std::size_t off, std::size_t s) {
        stacks[vicinity(off)][s].push_back(off);
        size_last[s] = vicinity(off);
        if (remembers) last = vicinity(off);
    }
    void deallocate_run(const std::vector<std::size_t>& offs, std::size_t s) {
        for (std::size_t i = 0; i < offs.size();) {
            std::size_t j = i + 1;
            while (j < offs.size() && vicinity(offs[j]) == vicinity(offs[i])) ++j;
            for (std::size_t k = j; k-- > i;) stacks[vicinity(offs[k])][s].push_back(offs[k]);
            if (remembers) last = vicinity(offs[i]);
            i = j;
        }
    }
};

} // namespace

template <class P>
constexpr bool keeps_span_chunks = requires { requires P::keeps_span_chunks; };

// ExactChunk: the table takes the rule's very chunk; else (a table that
// spills, whose chunks of a size in a class may lie in two stacks) a chunk of
// the rule's class.
// NullHints: some requests carry no hint. A table that spills forgets where
// a size was when one of its stacks goes to another size, which the model
// does not follow: those tables get hints only.
template <class P, unsigned Shift = 16, unsigned Bits = 48, bool ExactChunk = true, bool NullHints = true>
void follows_rule(bool remembers, bool per_size = false) {
    for (unsigned seed = 1; seed <= 2; ++seed) {
        table<P> a;
        velox_rule m;
        m.remembers = remembers;
        m.per_size = per_size;
        m.base = reinterpret_cast<std::uintptr_t>(a.mem.base);
        m.shift = Shift;
        m.bits = Bits;
        std::mt19937_64 rng(seed);
        // A chunk must hold a class node (a heap rounds sizes up to min_chunk).
        std::vector<std::size_t> sizes = {16, 32, 48, 64, 96, 128, 160, 256, 512};
        std::erase_if(sizes, [](std::size_t z) { return z < P::min_chunk; });
        std::vector<std::size_t> page_size(region / page);
        for (auto& s : page_size) s = sizes[rng() % sizes.size()];
        auto chunk_size = [&](std::size_t off) { return page_size[off / page]; };
        std::map<std::size_t, std::uint64_t> live;
        std::size_t free_chunks = 0;
        for (std::size_t pg = 0; pg < page_size.size(); ++pg)
            for (std::size_t k = page / page_size[pg]; k-- > 0;) {
                const std::size_t off = pg * page + k * page_size[pg];
                P::deallocate(a.h, a.at(off), page_size[pg]);
                m.deallocate(off, page_size[pg]);
                ++free_chunks;
            }
        const std::size_t chunks = free_chunks;
        // As a heap frees: with the stack each page's span was given when it
        // was cut (kept across drains, which release classes). Every eighth
        // page stands for a span that straddles its class's lower edge (a
        // stack never pushed to: each free from it misses).
        std::vector<void*> span_stack(page_size.size());
        if constexpr (keeps_span_chunks<P>)
            for (std::size_t pg = 0; pg < page_size.size(); ++pg) {
                std::byte* const from = a.at(pg * page) - (pg % 8 == 0 ? page : 0);
                span_stack[pg] = P::span_chunks(a.h, from, a.at((pg + 1) * page) - from,
                                                P::classify(page_size[pg]).index);
            }
        std::uint64_t stamp = 1;
        std::optional<std::size_t> recent;
        auto random_live = [&] {
            auto it = live.begin();
            std::advance(it, static_cast<long>(rng() % live.size()));
            return it->first;
        };
        auto forget = [&](std::size_t off) {
            std::uint64_t x = 0;
            std::memcpy(&x, a.at(off) + chunk_size(off) - 8, 8);
            REQUIRE(x == live[off]);
            live.erase(off);
            ++free_chunks;
        };
        for (std::size_t op = 0; op < 25000; ++op) {
            const unsigned dice = static_cast<unsigned>(rng() % 100);
            const unsigned allocations = free_chunks * 20 > chunks ? 65 : 40;
            if (dice < allocations || live.empty()) {
                const std::size_t s = sizes[rng() % sizes.size()];
                std::optional<std::size_t> hint;
                if (const unsigned h = static_cast<unsigned>(rng() % 4); h == 0 && recent) hint = *recent;
                else if (h == 1 && !live.empty()) hint = random_live();
                else if (h == 2 || !NullHints) hint = rng() % region;
                std::byte* p = P::allocate(a.h, al::request{s, hint ? a.at(*hint) : nullptr});
                auto want = m.allocate(s, hint);
                REQUIRE(want.has_value() == (p != nullptr));
                if (!p) continue;
                if (!ExactChunk && a.offset(p) != *want) {
                    REQUIRE(m.vicinity(a.offset(p)) == m.vicinity(*want));
                    m.took_instead(*want, a.offset(p), s);
                    *want = a.offset(p);
                }
                REQUIRE(a.offset(p) == *want);
                REQUIRE(chunk_size(*want) == s);
                REQUIRE(live.count(*want) == 0);
                live[*want] = stamp;
                std::memcpy(p + s - 8, &stamp, 8);
                ++stamp;
                --free_chunks;
                recent = *want;
            } else if (dice < 90) {
                const std::size_t off = random_live();
                forget(off);
                if constexpr (keeps_span_chunks<P>) {
                    const std::size_t n = chunk_size(off);
                    P::deallocate(a.h, a.at(off), n, P::classify(n).index, span_stack[off / page]);
                } else {
                    P::deallocate(a.h, a.at(off), chunk_size(off));
                }
                m.deallocate(off, chunk_size(off));
            } else if (dice < 98) {
                // A range free of one size, in address order (several vicinities).
                const std::size_t s = chunk_size(random_live());
                std::vector<std::size_t> offs;
                for (auto& [off, st] : live)
                    if (chunk_size(off) == s && rng() % 2 == 0 && offs.size() < 24) offs.push_back(off);
                if (offs.empty()) continue;
                std::vector<std::byte*> ps;
                for (std::size_t off : offs) {
                    forget(off);
                    ps.push_back(a.at(off));
                }
                al::deallocate_run_in<P>(a.h, ps.data(), ps.size(), s);
                m.deallocate_run(offs, s);
            } else {
                // A sweep: every free chunk out, the table empty, all back in address order.
                std::vector<std::size_t> drained;
                P::drain(a.h, [&](std::byte* p) { drained.push_back(a.offset(p)); });
                REQUIRE(P::empty(a.h));
                REQUIRE(drained.size() == free_chunks);
                std::sort(drained.begin(), drained.end());
                m = velox_rule{{}, remembers, per_size, velox_rule::none, {}, m.base, Shift, Bits};
                for (std::size_t off : drained) {
                    REQUIRE(live.count(off) == 0);
                    P::deallocate(a.h, a.at(off), chunk_size(off));
                    m.deallocate(off, chunk_size(off));
                }
            }
        }
        REQUIRE(P::empty(a.h) == (free_chunks == 0));
        P::clear(a.h);
        REQUIRE(P::empty(a.h));
    }
}

TEST_CASE("Velox over size classes follows the rule, range frees and drains included", "[held_free]") {
    follows_rule<al::velox_classed_partition<>>(true);
}

TEST_CASE("a table of size tables under match_first follows its rule", "[held_free]") {
    // No class used last: the hint's class, else the lowest holding the size;
    // a pop or a free leaves the table's last class alone, so a request
    // without a hint has no class of its own.
    using inner = al::hash_table<al::size, al::list<void>, al::match_only, al::spaced_classes<16, 128, 4, 65536>>;
    using first = al::hash_table<al::vicinity<16>, inner, al::match_first, al::sparse_identity>;
    static_assert(first::sized);
    follows_rule<first>(false);
}

TEST_CASE("Medius over size classes follows the rule, range frees and drains included", "[held_free]") {
    // A page's sizes in two ways; a page holds one size here, so nothing spills.
    using medius = al::medius_classed_partition<>;
    static_assert(medius::sized && !medius::holds_last_free);
    follows_rule<medius, 12, 16>(true);
}

TEST_CASE("with the class used last kept per size, a table follows that rule", "[held_free]") {
    // The Medius library's partition (one size a page), and Velox' vicinities
    // (many sizes a class), where the class any size touched last would
    // often differ from the size's own.
    using medius = al::medius_classed_partition<12, 16, 2, 65536, al::match_size_last_first>;
    static_assert(medius::sized && !medius::holds_last_free);
    follows_rule<medius, 12, 16>(true, true);
    using inner = al::hash_table<al::size, al::list<void>, al::match_only, al::spaced_classes<16, 128, 4, 65536>>;
    using velox = al::hash_table<al::vicinity<16>, inner, al::match_size_last_first, al::sparse_identity>;
    static_assert(velox::sized);
    follows_rule<velox>(true, true);
}

// A missed free reads its chunk's size from the class (size_fronts'
// sizes_by_class): the inverse must give every class's exact size.
template <class Classes>
constexpr bool sizes_invert_classes() {
    for (std::size_t k = 1; k < Classes::bounded_classes; ++k) {
        const std::size_t n = Classes::size_of_class(k);
        if (Classes::round(n) != n || Classes::classify(n).index != k || Classes::classify(n).size != n) return false;
        if (Classes::classify(n - 1).index != k && Classes::classify(n - 1).index != k - 1) return false;
    }
    return Classes::size_of_class(Classes::bounded_classes - 1) == Classes::max_size;
}
static_assert(sizes_invert_classes<al::spaced_classes<16, 128, 4, 65536>>());
static_assert(sizes_invert_classes<al::spaced_classes<8, 64, 2, 4096>>());
static_assert(al::spaced_classes<16, 128, 4>::size_of_class(9) == 160 &&
              al::spaced_classes<16, 128, 4>::size_of_class(13) == 320);   // unbounded: computed

TEST_CASE("the tables of sizes under Velox and Medius tell each class's chunk size", "[held_free]") {
    using classes = al::spaced_classes<16, 128, 4, 65536>;
    using ways = al::size_ways<classes, 2>;
    using inner = al::hash_table<al::size, al::list<void>, al::match_only, classes>;
    static_assert(al::size_fronts<ways, al::match_size_last_first>::sizes_by_class);
    static_assert(al::size_fronts<inner, al::match_last_first>::sizes_by_class);
    // A page's stacks are often empty: a missed free notes its class without
    // asking; a vicinity's asks (the model tests above run both).
    static_assert(al::size_fronts<ways, al::match_size_last_first>::notes_every_miss);
    static_assert(!al::size_fronts<inner, al::match_last_first>::notes_every_miss);
    for (const std::size_t n : {16u, 24u, 48u, 128u, 160u, 1000u, 1024u, 5000u, 65536u}) {
        const std::size_t r = classes::round(n);
        CHECK(ways::class_bytes(ways::size_class_of(r)) == r);
        CHECK(inner::class_bytes(inner::size_class_of(r)) == r);
    }
}

TEST_CASE("a table of ways follows the rule when its classes hold more sizes than ways", "[held_free]") {
    // 16 KiB classes over pages of random sizes: up to four sizes a class,
    // so one or two ways are claimed from size to size and sizes spill into
    // the class's list. The chunk a request gets is then of the rule's
    // class, not always its very chunk.
    using two = al::medius_classed_partition<14, 14, 2>;
    using one = al::medius_classed_partition<14, 14, 1>;
    follows_rule<two, 14, 14, false, false>(true);
    follows_rule<one, 14, 14, false, false>(true);
}

TEST_CASE("a class's sizes beyond its ways spill into its list and come back", "[held_free]") {
    // One 16 KiB class, four pages of four sizes, two ways: two sizes get
    // stacks, two spill; every chunk comes back, each of its size, and an
    // emptied way goes to the next size freed into the class.
    using two = al::medius_classed_partition<14, 14, 2>;
    using ways = al::size_ways<al::spaced_classes<16, 128, 4, 65536>, 2>;
    table<two> t;
    const std::size_t sizes[] = {32, 64, 128, 256};
    std::size_t count = 0;
    for (std::size_t pg = 0; pg < 4; ++pg)
        for (std::size_t k = 0; k < page / sizes[pg]; ++k, ++count) two::deallocate(t.h, t.at(pg * page + k * sizes[pg]), sizes[pg]);
    auto& cls = *t.h.classes.find(0);
    REQUIRE_FALSE(ways::spill::empty(cls.spilled));
    REQUIRE(ways::find_chunks(cls, ways::size_class_of(32)) != nullptr);
    REQUIRE(ways::find_chunks(cls, ways::size_class_of(256)) == nullptr);
    std::set<std::byte*> seen;
    for (std::size_t pg = 0; pg < 4; ++pg)
        while (std::byte* p = two::allocate(t.h, al::request{sizes[pg], t.at(0)})) {
            REQUIRE(static_cast<std::size_t>(p - t.at(pg * page)) < page);
            REQUIRE(static_cast<std::size_t>(p - t.at(pg * page)) % sizes[pg] == 0);
            REQUIRE(seen.insert(p).second);
        }
    REQUIRE(seen.size() == count);
    REQUIRE(two::empty(t.h));
    // Both ways are empty now: a free of a spilled size claims one.
    two::deallocate(t.h, t.at(3 * page), 256);
    REQUIRE(ways::find_chunks(cls, ways::size_class_of(256)) != nullptr);
    REQUIRE(two::allocate(t.h, al::request{256, nullptr}) == t.at(3 * page));
}

TEST_CASE("a request without a hint goes where its size was last taken from or freed into", "[held_free]") {
    // Three vicinities of 32-byte chunks; the size was last taken from the
    // middle one, and a free of another size made the highest the class
    // used last. An unhinted request of 32 bytes takes the middle one's,
    // then, after a free of 32 bytes into the lowest, the lowest's; an
    // explicit hint still wins.
    using P = al::velox_classed_partition<>;
    table<P> t;
    constexpr std::size_t v = std::size_t{1} << 16;
    for (std::size_t c = 0; c < 3; ++c)
        for (std::size_t k = 0; k < 8; ++k) P::deallocate(t.h, t.at(c * v + k * 32), 32);
    std::byte* mid = P::allocate(t.h, al::request{32, t.at(v)});
    REQUIRE(t.offset(mid) / v == 1);
    P::deallocate(t.h, t.at(2 * v + 4096), 64);   // the highest is now the class used last
    REQUIRE(t.offset(P::allocate(t.h, al::request{32, nullptr})) / v == 1);
    std::byte* low = P::allocate(t.h, al::request{32, t.at(0)});
    REQUIRE(t.offset(low) / v == 0);
    REQUIRE(t.offset(P::allocate(t.h, al::request{32, nullptr})) / v == 0);
    P::deallocate(t.h, mid, 32);
    REQUIRE(P::allocate(t.h, al::request{32, nullptr}) == mid);
    REQUIRE(t.offset(P::allocate(t.h, al::request{32, t.at(2 * v)})) / v == 2);
    // Under match_first nothing is remembered: no hint, the lowest class.
    using inner = al::hash_table<al::size, al::list<void>, al::match_only, al::spaced_classes<16, 128, 4, 65536>>;
    using first = al::hash_table<al::vicinity<16>, inner, al::match_first, al::sparse_identity>;
    table<first> f;
    for (std::size_t c = 0; c < 2; ++c) first::deallocate(f.h, f.at(c * v), 32);
    first::allocate(f.h, al::request{32, f.at(v)});
    first::deallocate(f.h, f.at(v), 32);
    REQUIRE(first::allocate(f.h, al::request{32, nullptr}) == f.at(0));
}

TEST_CASE("match_size_last_first falls back to where the size was last, not to the class any size used last",
          "[held_free]") {
    // Vicinities 0, 1 and 2 hold 32-byte chunks; 32 bytes were last taken
    // from vicinity 1, and a free of 64 bytes made vicinity 2 the class used
    // last. A request hinted into vicinity 5, which holds nothing, goes to
    // vicinity 1 per size, to vicinity 2 under match_last_first; without a
    // hint, to vicinity 1 under both.
    using inner = al::hash_table<al::size, al::list<void>, al::match_only, al::spaced_classes<16, 128, 4, 65536>>;
    using per_size = al::hash_table<al::vicinity<16>, inner, al::match_size_last_first, al::sparse_identity>;
    using any_size = al::hash_table<al::vicinity<16>, inner, al::match_last_first, al::sparse_identity>;
    constexpr std::size_t v = std::size_t{1} << 16;
    auto run = [&]<class P>(table<P>& t) {
        for (std::size_t c = 0; c < 3; ++c)
            for (std::size_t k = 0; k < 8; ++k) P::deallocate(t.h, t.at(c * v + k * 32), 32);
        REQUIRE(t.offset(P::allocate(t.h, al::request{32, t.at(v)})) / v == 1);
        P::deallocate(t.h, t.at(2 * v + 4096), 64);
        const std::size_t hinted = t.offset(P::allocate(t.h, al::request{32, t.at(5 * v)})) / v;
        REQUIRE(t.offset(P::allocate(t.h, al::request{32, nullptr})) / v == hinted);
        return hinted;
    };
    table<per_size> a;
    table<any_size> b;
    REQUIRE(run(a) == 1);
    REQUIRE(run(b) == 2);
}
