// voronoi (Olden): Delaunay triangulation by divide and conquer (Guibas and
// Stolfi, 1985) on the quad-edge structure, then its dual, the Voronoi
// diagram: one Voronoi vertex (circumcentre) per Delaunay triangle.
//
// Points live in a balanced binary tree whose in-order sequence is sorted by
// x (the x axis is cut into one slot per point), so the recursion splits the
// tree instead of an array: dt(T, extra) triangulates T's points followed by
// an optional extra point to their right, as dt(T.left, T) + dt(T.right,
// extra) joined by the Guibas-Stolfi merge. Coordinates are integers below
// 2^30, so the orientation and in-circle predicates are exact (64- and
// 128-bit integer arithmetic) and the result does not depend on rounding.
//
// A quad-edge record holds the four directed edges of one undirected edge
// and its dual: e[0], e[2] are the primal directions (data: origin vertex),
// e[1], e[3] the dual ones (data: the face on their origin side). An edge
// reference is the record's address with the rotation in its two low bits.
//
// Objects: vertices (near their tree parent); quad edges (near the vertex or
// edge they are attached to; many are deleted during the merges); faces =
// Voronoi vertices, kept in a list (near their predecessor).
//
// Checks: Euler's formula V - E + F = 2, E = 3V - 3 - h and 2V - 2 - h
// triangles for a hull of h vertices; every inner face is a counter-clockwise
// triangle; every edge is locally Delaunay (exact in-circle test); the dual
// structure is consistent: e.Onext.Rot.Onext.Rot == e, every dual edge out of
// a face has that face as origin, and each Voronoi edge joins two
// circumcentres equidistant from the edge's end points, perpendicular to it.
#pragma once
#include <cmath>
#include <cstdint>
#include <new>
#include <stdexcept>

#include "common/policy.hpp"
#include "olden/rng.hpp"
#include "olden/scale.hpp"

namespace bench::olden {

namespace voronoi_detail {

__extension__ using i128 = __int128;

struct vertex {
    std::int32_t x, y;
    vertex* left;
    vertex* right;
};

struct face;

using edge = std::uintptr_t; // quad_edge address | rotation (0..3)

struct quad_edge {
    edge next[4];   // Onext of each rotation
    vertex* org[2]; // origins of e[0] and e[2]
    face* dual[2];  // origins of e[1] and e[3] (faces), set once triangulated
};

struct face {
    face* next; // list of all faces
    edge e;     // an edge with this face on its left
    double cx, cy; // circumcentre (inner faces)
    std::int32_t sides;
    bool outer;
};

inline quad_edge* qe(edge e) { return reinterpret_cast<quad_edge*>(e & ~edge{3}); }
inline unsigned rot_of(edge e) { return static_cast<unsigned>(e & 3); }
inline edge with_rot(edge e, unsigned r) { return (e & ~edge{3}) | (r & 3); }
inline edge rot(edge e) { return with_rot(e, rot_of(e) + 1); }
inline edge sym(edge e) { return with_rot(e, rot_of(e) + 2); }
inline edge invrot(edge e) { return with_rot(e, rot_of(e) + 3); }
inline edge onext(edge e) { return qe(e)->next[rot_of(e)]; }
inline edge& onext_ref(edge e) { return qe(e)->next[rot_of(e)]; }
inline edge oprev(edge e) { return rot(onext(rot(e))); }
inline edge lnext(edge e) { return rot(onext(invrot(e))); }
inline edge rprev(edge e) { return onext(sym(e)); }
inline vertex*& org(edge e) { return qe(e)->org[rot_of(e) >> 1]; }
inline vertex*& dest(edge e) { return org(sym(e)); }
inline face*& left_face(edge e) { return qe(e)->dual[rot_of(invrot(e)) >> 1]; } // origin of InvRot

struct counters {
    std::uint64_t made = 0, deleted = 0;
};

template <bench::policy P>
edge make_edge(P& alloc, const void* hint, vertex* a, vertex* b, counters& n) {
    auto* q = new (alloc.allocate(sizeof(quad_edge), hint)) quad_edge{};
    const edge e = reinterpret_cast<edge>(q);
    q->next[0] = e;
    q->next[1] = with_rot(e, 3);
    q->next[2] = with_rot(e, 2);
    q->next[3] = with_rot(e, 1);
    q->org[0] = a;
    q->org[1] = b;
    ++n.made;
    return e;
}

inline void splice(edge a, edge b) {
    const edge alpha = rot(onext(a)), beta = rot(onext(b));
    const edge an = onext(a), bn = onext(b), alphan = onext(alpha), betan = onext(beta);
    onext_ref(a) = bn;
    onext_ref(b) = an;
    onext_ref(alpha) = betan;
    onext_ref(beta) = alphan;
}

template <bench::policy P>
edge connect(P& alloc, edge a, edge b, counters& n) {
    const edge e = make_edge(alloc, qe(a), dest(a), org(b), n);
    splice(e, lnext(a));
    splice(sym(e), b);
    return e;
}

template <bench::policy P>
void delete_edge(P& alloc, edge e, counters& n) {
    splice(e, oprev(e));
    splice(sym(e), oprev(sym(e)));
    quad_edge* q = qe(e);
    q->~quad_edge();
    alloc.deallocate(q, sizeof(quad_edge));
    ++n.deleted;
}

// Exact predicates on integer coordinates below 2^30.
inline std::int64_t orient(const vertex* a, const vertex* b, const vertex* c) {
    return (std::int64_t{b->x} - a->x) * (std::int64_t{c->y} - a->y) -
           (std::int64_t{b->y} - a->y) * (std::int64_t{c->x} - a->x);
}
inline bool ccw(const vertex* a, const vertex* b, const vertex* c) { return orient(a, b, c) > 0; }
// > 0 iff d lies strictly inside the circle through a, b, c (counter-clockwise).
inline i128 incircle_det(const vertex* a, const vertex* b, const vertex* c, const vertex* d) {
    const std::int64_t adx = std::int64_t{a->x} - d->x, ady = std::int64_t{a->y} - d->y;
    const std::int64_t bdx = std::int64_t{b->x} - d->x, bdy = std::int64_t{b->y} - d->y;
    const std::int64_t cdx = std::int64_t{c->x} - d->x, cdy = std::int64_t{c->y} - d->y;
    const i128 al = i128{adx} * adx + i128{ady} * ady;
    const i128 bl = i128{bdx} * bdx + i128{bdy} * bdy;
    const i128 cl = i128{cdx} * cdx + i128{cdy} * cdy;
    return al * (i128{bdx} * cdy - i128{bdy} * cdx) + bl * (i128{cdx} * ady - i128{cdy} * adx) +
           cl * (i128{adx} * bdy - i128{ady} * bdx);
}
inline bool incircle(const vertex* a, const vertex* b, const vertex* c, const vertex* d) {
    return incircle_det(a, b, c, d) > 0;
}
inline bool right_of(const vertex* x, edge e) { return ccw(x, dest(e), org(e)); }
inline bool left_of(const vertex* x, edge e) { return ccw(x, org(e), dest(e)); }

struct hull_edges {
    edge le, re; // ccw hull edge out of the leftmost vertex, cw hull edge out of the rightmost
};

template <bench::policy P>
hull_edges base_case(P& alloc, vertex* const* s, int n, counters& cnt) {
    if (n == 2) {
        const edge a = make_edge(alloc, s[0], s[0], s[1], cnt);
        return {a, sym(a)};
    }
    const edge a = make_edge(alloc, s[0], s[0], s[1], cnt);
    const edge b = make_edge(alloc, qe(a), s[1], s[2], cnt);
    splice(sym(a), b);
    if (ccw(s[0], s[1], s[2])) {
        connect(alloc, b, a, cnt);
        return {a, sym(b)};
    }
    if (ccw(s[0], s[2], s[1])) {
        const edge c = connect(alloc, b, a, cnt);
        return {sym(c), c};
    }
    return {a, sym(b)}; // collinear
}

inline int inorder(vertex* t, int n, vertex** out, int k) {
    if (t == nullptr || n == 0) return k;
    const int nl = (n - 1) / 2;
    k = inorder(t->left, nl, out, k);
    out[k++] = t;
    return inorder(t->right, n - 1 - nl, out, k);
}

// Triangulate the n points of subtree t followed by `extra` (if non-null).
template <bench::policy P>
hull_edges triangulate(P& alloc, vertex* t, int n, vertex* extra, counters& cnt) {
    const int total = n + (extra != nullptr ? 1 : 0);
    if (total <= 3) {
        vertex* s[3];
        int k = inorder(t, n, s, 0);
        if (extra != nullptr) s[k++] = extra;
        if (k < 2) throw std::logic_error("voronoi: subproblem with fewer than two points");
        return base_case(alloc, s, k, cnt);
    }
    const int nl = (n - 1) / 2;
    const hull_edges L = triangulate(alloc, t->left, nl, t, cnt);
    const hull_edges R = triangulate(alloc, t->right, n - 1 - nl, extra, cnt);
    edge ldo = L.le, ldi = L.re, rdi = R.le, rdo = R.re;

    // Lower common tangent.
    for (;;) {
        if (left_of(org(rdi), ldi)) ldi = lnext(ldi);
        else if (right_of(org(ldi), rdi)) rdi = rprev(rdi);
        else break;
    }
    edge basel = connect(alloc, sym(rdi), ldi, cnt);
    if (org(ldi) == org(ldo)) ldo = sym(basel);
    if (org(rdi) == org(rdo)) rdo = basel;

    auto valid = [&basel](edge e) { return right_of(dest(e), basel); };
    // Zip the two halves together from the bottom up.
    for (;;) {
        edge lcand = onext(sym(basel));
        if (valid(lcand)) {
            while (incircle(dest(basel), org(basel), dest(lcand), dest(onext(lcand)))) {
                const edge t2 = onext(lcand);
                delete_edge(alloc, lcand, cnt);
                lcand = t2;
            }
        }
        edge rcand = oprev(basel);
        if (valid(rcand)) {
            while (incircle(dest(basel), org(basel), dest(rcand), dest(oprev(rcand)))) {
                const edge t2 = oprev(rcand);
                delete_edge(alloc, rcand, cnt);
                rcand = t2;
            }
        }
        const bool lv = valid(lcand), rv = valid(rcand);
        if (!lv && !rv) break;
        if (!lv || (rv && incircle(dest(lcand), org(lcand), org(rcand), dest(rcand))))
            basel = connect(alloc, rcand, sym(basel), cnt);
        else
            basel = connect(alloc, sym(basel), sym(lcand), cnt);
    }
    return {ldo, rdo};
}

// Points: n slots along x, one point per slot, in-order sorted.
template <bench::policy P>
vertex* build(P& alloc, int n, std::int64_t first_slot, std::int64_t slot_width, const void* hint, rng& g) {
    if (n == 0) return nullptr;
    const int nl = (n - 1) / 2;
    const std::int64_t slot = first_slot + nl;
    auto* v = new (alloc.allocate(sizeof(vertex), hint))
        vertex{static_cast<std::int32_t>(slot * slot_width + static_cast<std::int64_t>(g.below(std::uint64_t(slot_width)))),
               static_cast<std::int32_t>(g.below(std::uint64_t{1} << 30)), nullptr, nullptr};
    v->left = build(alloc, nl, first_slot, slot_width, v, g);
    v->right = build(alloc, n - 1 - nl, slot + 1, slot_width, v, g);
    return v;
}

template <bench::policy P>
void destroy(P& alloc, vertex* v) {
    if (v == nullptr) return;
    destroy(alloc, v->left);
    destroy(alloc, v->right);
    v->~vertex();
    alloc.deallocate(v, sizeof(vertex));
}

// Circumcentre of a counter-clockwise triangle (exact numerators).
inline void circumcentre(const vertex* a, const vertex* b, const vertex* c, double& x, double& y) {
    const std::int64_t bx = std::int64_t{b->x} - a->x, by = std::int64_t{b->y} - a->y;
    const std::int64_t cx = std::int64_t{c->x} - a->x, cy = std::int64_t{c->y} - a->y;
    const i128 d = 2 * (i128{bx} * cy - i128{by} * cx);
    const i128 b2 = i128{bx} * bx + i128{by} * by, c2 = i128{cx} * cx + i128{cy} * cy;
    const i128 nx = i128{cy} * b2 - i128{by} * c2;
    const i128 ny = i128{bx} * c2 - i128{cx} * b2;
    x = double(a->x) + double(nx) / double(d);
    y = double(a->y) + double(ny) / double(d);
}

inline std::uint64_t vkey(const vertex* v) {
    return mix64((std::uint64_t(std::uint32_t(v->x)) << 32) | std::uint32_t(v->y));
}

inline int voronoi_points(scale s) {
    switch (s) {
    case scale::quick: return 25000;
    case scale::standard: return 150000;
    case scale::full: return 100000; // the paper's input
    }
    return 25000;
}

} // namespace voronoi_detail

template <bench::policy P>
std::uint64_t run_voronoi(P& alloc, scale s) {
    using namespace voronoi_detail;
    const int n = voronoi_points(s);
    rng g(0x766f726f6e6f69ULL);
    const std::int64_t width = (std::int64_t{1} << 30) / n;
    vertex* root = build(alloc, n, 0, width, nullptr, g);
    counters cnt;
    const hull_edges h = triangulate(alloc, root, n, nullptr, cnt);

    // Faces by breadth-first search from the outer face (left of sym(le)).
    auto make_face = [&](edge e, const void* hint) {
        auto* f = new (alloc.allocate(sizeof(face), hint)) face{nullptr, e, 0, 0, 0, false};
        edge x = e;
        do {
            left_face(x) = f;
            ++f->sides;
            x = lnext(x);
        } while (x != e);
        return f;
    };
    face* outer = make_face(sym(h.le), qe(h.le));
    outer->outer = true;
    face* tail = outer;
    std::uint64_t faces = 1;
    for (face* f = outer; f != nullptr; f = f->next) {
        edge x = f->e;
        do {
            const edge y = sym(x);
            if (left_face(y) == nullptr) {
                face* nf = make_face(y, tail);
                tail->next = nf;
                tail = nf;
                ++faces;
            }
            x = lnext(x);
        } while (x != f->e);
    }

    // Checks.
    bool ok_tri = true, ok_delaunay = true, ok_dual = true, ok_geom = true;
    std::uint64_t directed = 0, edge_hash = 0;
    for (face* f = outer; f != nullptr; f = f->next) {
        if (f->outer) continue;
        const edge e = f->e;
        ok_tri = ok_tri && f->sides == 3 && ccw(org(e), dest(e), dest(lnext(e)));
        if (ok_tri) circumcentre(org(e), dest(e), dest(lnext(e)), f->cx, f->cy);
    }
    for (face* f = outer; ok_tri && f != nullptr; f = f->next) {
        edge x = f->e;
        do {
            ++directed;
            edge_hash += vkey(org(x)) ^ vkey(dest(x));
            if (rot(onext(rot(onext(x)))) != x) ok_dual = false;
            if (left_face(x) != f || qe(onext(invrot(x)))->dual[rot_of(onext(invrot(x))) >> 1] != f) ok_dual = false;
            const face* r = left_face(sym(x));
            if (r == nullptr || r == f) ok_dual = false;
            if (!f->outer && r != nullptr && !r->outer) {
                // Locally Delaunay: the apex across x is not inside f's circle.
                const vertex* apex = dest(lnext(sym(x)));
                if (incircle(org(x), dest(x), dest(lnext(x)), apex)) ok_delaunay = false;
                // Voronoi edge f-r: both centres on the perpendicular bisector of x.
                const double ox = org(x)->x, oy = org(x)->y, dx = dest(x)->x, dy = dest(x)->y;
                const double d1 = std::hypot(f->cx - ox, f->cy - oy), d2 = std::hypot(f->cx - dx, f->cy - dy);
                if (std::fabs(d1 - d2) > 1e-9 * (d1 + d2 + 1)) ok_geom = false;
                const double ex = dx - ox, ey = dy - oy, vx = f->cx - r->cx, vy = f->cy - r->cy;
                const double scale_ = (std::fabs(f->cx) + std::fabs(f->cy) + std::fabs(r->cx) + std::fabs(r->cy) + 1) *
                                      std::hypot(ex, ey);
                if (std::fabs(vx * ex + vy * ey) > 1e-9 * scale_) ok_geom = false;
            }
            x = lnext(x);
        } while (x != f->e);
    }
    const std::uint64_t V = static_cast<std::uint64_t>(n), E = directed / 2, F = faces;
    const std::uint64_t hull = static_cast<std::uint64_t>(outer->sides);

    // Free every face and quad edge: a quad edge goes once both of its
    // directions have been walked (marked by clearing their face slots).
    for (face* f = outer; f != nullptr;) {
        edge x = f->e;
        const edge start = x;
        do {
            const edge nx = lnext(x);
            left_face(x) = nullptr;
            if (left_face(sym(x)) == nullptr) {
                quad_edge* q = qe(x);
                q->~quad_edge();
                alloc.deallocate(q, sizeof(quad_edge));
            }
            x = nx;
        } while (x != start);
        face* fn = f->next;
        f->~face();
        alloc.deallocate(f, sizeof(face));
        f = fn;
    }
    destroy(alloc, root);

    if (!ok_tri) throw std::runtime_error("voronoi: an inner face is not a counter-clockwise triangle");
    if (V + F != E + 2) throw std::runtime_error("voronoi: Euler's formula V - E + F = 2 violated");
    if (E != 3 * V - 3 - hull || F - 1 != 2 * V - 2 - hull)
        throw std::runtime_error("voronoi: edge or triangle count inconsistent with the hull size");
    if (!ok_delaunay) throw std::runtime_error("voronoi: an edge is not locally Delaunay");
    if (!ok_dual) throw std::runtime_error("voronoi: dual (quad-edge) structure inconsistent");
    if (!ok_geom) throw std::runtime_error("voronoi: Voronoi edge not on the perpendicular bisector");
    if (cnt.made - cnt.deleted != E) throw std::runtime_error("voronoi: edges made - deleted != edges in the result");

    std::uint64_t sum = combine(0x766f726f6e6f6900ULL, V);
    sum = combine(sum, E);
    sum = combine(sum, F);
    sum = combine(sum, hull);
    sum = combine(sum, cnt.made);
    sum = combine(sum, edge_hash);
    return sum;
}

} // namespace bench::olden
