// tsp (Olden): a travelling-salesman tour by divide and conquer (Karp's
// partitioning scheme with a closest-point heuristic for the small parts).
//
// Cities are the nodes of a 2-d tree over the unit square: a node covering a
// rectangle holds one city placed uniformly in it and splits the rectangle
// in half (alternately in x and y) between its two subtrees. Olden rounds the
// requested number of cities up to a complete tree, and so do we.
//
// The tour is a doubly linked cycle threaded through the tree nodes
// themselves (next/prev). A subtree of at most `cutoff` cities is solved
// directly: its cities are inserted one by one next to the closest city
// already in the tour, on whichever side costs less. A larger subtree solves
// both halves and joins them through its own city: the join removes one edge
// of each sub-tour next to the cities closest to the joining city and
// reconnects through it, choosing the cheapest of the eight variants
// (reversing one sub-tour when needed).
//
// Objects: one node per city, each allocated with its tree parent as hint.
//
// Checks: the tour is a consistent cycle (next->prev == self) that visits
// every city exactly once; its length is finite and at least a lower bound:
// twice the sum of the radii of disjoint empty disks around the cities of the
// leaf blocks (each disk lies inside its block's rectangle, contains no other
// city, and the tour must enter and leave it).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <new>
#include <stdexcept>

#include "common/policy.hpp"
#include "olden/rng.hpp"
#include "olden/scale.hpp"

namespace bench::olden {

namespace tsp_detail {

struct city {
    double x, y;
    city* left;
    city* right;
    city* next; // tour successor
    city* prev; // tour predecessor
    std::int32_t size; // number of cities in this subtree
    std::int32_t mark; // set by the verification walk
};

inline constexpr int cutoff = 150; // Olden's conquer threshold

struct rect {
    double x0, x1, y0, y1;
    // Halves of the rectangle along dimension dir (0: x, 1: y).
    rect low(int dir) const { return dir == 0 ? rect{x0, (x0 + x1) / 2, y0, y1} : rect{x0, x1, y0, (y0 + y1) / 2}; }
    rect high(int dir) const { return dir == 0 ? rect{(x0 + x1) / 2, x1, y0, y1} : rect{x0, x1, (y0 + y1) / 2, y1}; }
};

inline double dist(const city* a, const city* b) { const double dx = a->x - b->x, dy = a->y - b->y;
    return std::sqrt(dx * dx + dy * dy);
}

template <bench::policy P>
city* build(P& alloc, int n, int dir, rect r, const void* hint, rng& g) {
    if (n == 0) return nullptr;
    auto* c = new (alloc.allocate(sizeof(city), hint))
        city{g.uniform(r.x0, r.x1), g.uniform(r.y0, r.y1), nullptr, nullptr, nullptr, nullptr, n, 0};
    const int nl = (n - 1) / 2;
    c->left = build(alloc, nl, 1 - dir, r.low(dir), c, g);
    c->right = build(alloc, n - 1 - nl, 1 - dir, r.high(dir), c, g);
    return c;
}

template <bench::policy P>
void destroy(P& alloc, city* c) {
    if (c == nullptr) return;
    destroy(alloc, c->left);
    destroy(alloc, c->right);
    c->~city();
    alloc.deallocate(c, sizeof(city));
}

// Chain the cities of a subtree through `next` (pre-order); returns the tail.
inline city* flatten(city* t, city* tail) {
    if (t == nullptr) return tail;
    tail->next = t;
    t->next = nullptr;
    tail = t;
    tail = flatten(t->left, tail);
    return flatten(t->right, tail);
}

// Insert c into the tour next to its closest tour city.
inline void insert_closest(city* tour, city* c) {
    city* best = tour;
    double bd = dist(tour, c);
    for (city* p = tour->next; p != tour; p = p->next) {
        const double d = dist(p, c);
        if (d < bd) {
            bd = d;
            best = p;
        }
    }
    city* before = best->prev;
    city* after = best->next;
    const double cost_before = dist(before, c) + bd - dist(before, best);
    const double cost_after = bd + dist(c, after) - dist(best, after);
    if (cost_before < cost_after) { // before -> c -> best
        before->next = c;
        c->prev = before;
        c->next = best;
        best->prev = c;
    } else { // best -> c -> after
        best->next = c;
        c->prev = best;
        c->next = after;
        after->prev = c;
    }
}

// Closest-point heuristic on a small subtree; returns a city of the tour.
inline city* conquer(city* t) {
    city head{};
    flatten(t, &head);
    city* first = head.next;
    city* rest = first->next;
    first->next = first->prev = first;
    while (rest != nullptr) {
        city* c = rest;
        rest = rest->next;
        insert_closest(first, c);
    }
    return first;
}

inline city* closest_in(city* tour, const city* c) {
    city* best = tour;
    double bd = dist(tour, c);
    for (city* p = tour->next; p != tour; p = p->next) {
        const double d = dist(p, c);
        if (d < bd) {
            bd = d;
            best = p;
        }
    }
    return best;
}

inline void reverse(city* tour) {
    city* p = tour;
    do {
        std::swap(p->next, p->prev);
        p = p->prev; // the old next
    } while (p != tour);
}

// Join tours a and b (either may be null) through city t.
inline city* merge(city* a, city* b, city* t) {
    if (a == nullptr && b == nullptr) {
        t->next = t->prev = t;
        return t;
    }
    if (a == nullptr || b == nullptr) {
        city* tour = a != nullptr ? a : b;
        insert_closest(tour, t);
        return tour;
    }
    city* ca = closest_in(a, t);
    city* cb = closest_in(b, t);
    // Directed edges p->q of a and r->s of b next to the closest cities.
    city* pa[2] = {ca->prev, ca};
    city* qa[2] = {ca, ca->next};
    city* rb[2] = {cb->prev, cb};
    city* sb[2] = {cb, cb->next};
    double best = 0;
    int bi = -1, bj = 0;
    bool brev = false;
    for (int i = 0; i < 2; ++i) {
        for (int j = 0; j < 2; ++j) {
            city *p = pa[i], *q = qa[i], *r = rb[j], *s = sb[j];
            const double base = dist(p, t) - dist(p, q) - dist(r, s);
            const double fwd = base + dist(t, s) + dist(r, q); // p t s .. r q
            const double rev = base + dist(t, r) + dist(s, q); // p t r .. s q
            if (bi < 0 || fwd < best) {
                best = fwd;
                bi = i;
                bj = j;
                brev = false;
            }
            if (rev < best) {
                best = rev;
                bi = i;
                bj = j;
                brev = true;
            }
        }
    }
    city *p = pa[bi], *q = qa[bi], *r = rb[bj], *s = sb[bj];
    if (brev) {
        reverse(b);
        std::swap(r, s);
    }
    p->next = t;
    t->prev = p;
    t->next = s;
    s->prev = t;
    r->next = q;
    q->prev = r;
    return a;
}

inline city* solve(city* t) {
    if (t == nullptr) return nullptr;
    if (t->size <= cutoff) return conquer(t);
    city* a = solve(t->left);
    city* b = solve(t->right);
    return merge(a, b, t);
}

// ---- verification -----------------------------------------------------

struct lower_bound {
    double sum = 0;       // sum of disk radii
    const city* anc[64];  // cities of the ancestors of the current subtree
    int depth = 0;
};

inline int collect(city* t, city** out, int n) {
    if (t == nullptr) return n;
    out[n++] = t;
    n = collect(t->left, out, n);
    return collect(t->right, out, n);
}

inline void disks(city* t, int dir, rect r, lower_bound& lb) {
    if (t == nullptr) return;
    if (t->size > cutoff) {
        if (lb.depth >= 64) throw std::runtime_error("tsp: tree too deep");
        lb.anc[lb.depth++] = t;
        disks(t->left, 1 - dir, r.low(dir), lb);
        disks(t->right, 1 - dir, r.high(dir), lb);
        --lb.depth;
        return;
    }
    city* members[cutoff];
    double rad[cutoff];
    const int n = collect(t, members, 0);
    for (int i = 0; i < n; ++i) {
        const city* c = members[i];
        double m = std::min(std::min(c->x - r.x0, r.x1 - c->x), std::min(c->y - r.y0, r.y1 - c->y));
        for (int k = 0; k < lb.depth; ++k) m = std::min(m, dist(c, lb.anc[k]));
        rad[i] = m;
    }
    for (int i = 0; i < n; ++i)
        for (int j = i + 1; j < n; ++j) {
            const double h = dist(members[i], members[j]) / 2;
            rad[i] = std::min(rad[i], h);
            rad[j] = std::min(rad[j], h);
        }
    for (int i = 0; i < n; ++i) lb.sum += std::max(rad[i], 0.0);
}

inline int tsp_depth(scale s) {
    switch (s) {
    case scale::quick: return 17;    // 131,071 cities
    case scale::standard: return 19; // 524,287 cities
    case scale::full: return 20;     // 1,000,000 cities rounded up: 1,048,575
    }
    return 17;
}

} // namespace tsp_detail

template <bench::policy P>
std::uint64_t run_tsp(P& alloc, scale s) {
    using namespace tsp_detail;
    const int n = (1 << tsp_depth(s)) - 1;
    rng g(0x747370ULL);
    const rect unit{0, 1, 0, 1};
    city* root = build(alloc, n, 0, unit, nullptr, g);
    city* tour = solve(root);

    // Walk the cycle once: consistency, every city once, length.
    double length = 0;
    std::int64_t visited = 0;
    bool consistent = true;
    std::uint64_t h = combine(0x7473700000000000ULL, static_cast<std::uint64_t>(n));
    city* c = tour;
    do {
        if (c->mark != 0 || c->next->prev != c) {
            consistent = false;
            break;
        }
        c->mark = 1;
        length += dist(c, c->next);
        ++visited;
        c = c->next;
    } while (c != tour && visited <= n);
    // Order-independent fingerprint of the tour's edges (cities by coordinates).
    std::uint64_t edges = 0;
    if (consistent) {
        c = tour;
        do {
            const auto ka = static_cast<std::uint64_t>(std::llround(c->x * 1e9)) * 0x1000003ULL +
                            static_cast<std::uint64_t>(std::llround(c->y * 1e9));
            const auto kb = static_cast<std::uint64_t>(std::llround(c->next->x * 1e9)) * 0x1000003ULL +
                            static_cast<std::uint64_t>(std::llround(c->next->y * 1e9));
            edges += mix64(ka) ^ mix64(kb); // symmetric in the edge's two ends
            c = c->next;
        } while (c != tour);
    }
    lower_bound lb;
    disks(root, 0, unit, lb);
    destroy(alloc, root);

    if (!consistent || visited != n) throw std::runtime_error("tsp: tour is not a single cycle through every city");
    if (!std::isfinite(length)) throw std::runtime_error("tsp: tour length is not finite");
    if (!(length >= 2 * lb.sum) || lb.sum <= 0) throw std::runtime_error("tsp: tour shorter than the lower bound");
    h = combine(h, edges);
    h = combine(h, static_cast<std::uint64_t>(std::llround(length * 1e6)));
    return h;
}

} // namespace bench::olden
