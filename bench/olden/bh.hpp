// Olden bh: Barnes-Hut hierarchical N-body simulation (Barnes & Hut 1986).
//
// Bodies start from a Plummer model (Aarseth, Henon & Wielen 1974) in
// standard units. Every time step rebuilds an octree over the bodies (a cell
// has eight slots, each empty, a body, or a sub-cell), computes every cell's
// mass and centre of mass bottom-up, and walks the tree once per body: a cell
// far enough away (size < theta * distance) acts as a point mass, otherwise it
// is opened. Plummer softening; leapfrog (kick-drift-kick) integration.
//
// Checks: every position, velocity and acceleration is finite, the root
// holds the total mass, the initial energy is that of a Plummer sphere
// (about -1/4), total momentum stays below 0.2 % of sum(m |v|), and the total
// energy drifts by less than 0.5 % (observed: ~1e-4 for both).
//
// Allocation: bodies as a list (hint: predecessor; the first has no
// neighbour), allocated once; cells every step (hint: the parent cell; the
// root has none), freed post-order at the end of the step.
#pragma once
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>

#include "objects.hpp"
#include "../common/policy.hpp"
#include "rng.hpp"
#include "scale.hpp"

namespace bench::olden {

namespace bh_impl {

enum class kind : int { body, cell };

struct node {
    kind type;
    double mass;
    double pos[3];
};

struct body : node {
    double vel[3];
    double acc[3];
    double phi;
    body* next;
};

struct cell : node {
    node* subp[8];
};

using olden::alloc_obj;
using olden::free_obj;

struct params {
    int nbody;
    int nsteps;
};

inline params problem_size(scale s) {
    switch (s) {
    case scale::quick: return {4096, 10};
    case scale::standard: return {16384, 10};
    case scale::full: return {32768, 10};   // paper: 32768 bodies
    }
    return {0, 0};
}

inline constexpr double dtime = 0.0125;
inline constexpr double eps = 0.05;     // softening length
inline constexpr double theta = 1.0;    // opening criterion (the original's tol)
inline constexpr double pi = 3.14159265358979323846;

// A random point on the unit sphere (rejection from the cube), scaled by r.
inline void pick_shell(rng& g, double r, double out[3]) {
    double sq;
    do {
        for (int k = 0; k < 3; ++k) out[k] = g.uniform(-1.0, 1.0);
        sq = out[0] * out[0] + out[1] * out[1] + out[2] * out[2];
    } while (sq > 1.0 || sq == 0.0);
    const double s = r / std::sqrt(sq);
    for (int k = 0; k < 3; ++k) out[k] *= s;
}

template <bench::policy P>
body* make_plummer(P& a, int n, rng& g) {
    const double rsc = 3.0 * pi / 16.0;
    const double vsc = std::sqrt(1.0 / rsc);
    body* first = nullptr;
    body* prev = nullptr;
    double cmr[3] = {0, 0, 0}, cmv[3] = {0, 0, 0};
    for (int i = 0; i < n; ++i) {
        body* b = alloc_obj<body>(a, prev);
        b->type = kind::body;
        b->mass = 1.0 / n;
        const double r = 1.0 / std::sqrt(std::pow(g.uniform(0.0, 0.999), -2.0 / 3.0) - 1.0);
        pick_shell(g, rsc * r, b->pos);
        double x, y;
        do {
            x = g.uniform(0.0, 1.0);
            y = g.uniform(0.0, 0.1);
        } while (y > x * x * std::pow(1.0 - x * x, 3.5));
        const double v = std::sqrt(2.0) * x / std::pow(1.0 + r * r, 0.25);
        pick_shell(g, vsc * v, b->vel);
        for (int k = 0; k < 3; ++k) {
            cmr[k] += b->mass * b->pos[k];
            cmv[k] += b->mass * b->vel[k];
        }
        if (prev != nullptr) prev->next = b;
        else first = b;
        prev = b;
    }
    for (body* b = first; b != nullptr; b = b->next)
        for (int k = 0; k < 3; ++k) {
            b->pos[k] -= cmr[k];
            b->vel[k] -= cmv[k];
        }
    return first;
}

struct tree {
    cell* root = nullptr;
    double center[3] = {0, 0, 0};
    double rsize = 0;
    std::uint64_t cells = 0;
    bool degenerate = false;
};

inline int octant(const double pos[3], const double c[3]) {
    return (pos[0] >= c[0] ? 1 : 0) | (pos[1] >= c[1] ? 2 : 0) | (pos[2] >= c[2] ? 4 : 0);
}

inline void child_center(const double c[3], double half, int oct, double out[3]) {
    for (int k = 0; k < 3; ++k) out[k] = c[k] + ((oct >> k) & 1 ? 0.5 : -0.5) * half;
}

template <bench::policy P>
cell* new_cell(P& a, const void* hint, tree& t) {
    cell* c = alloc_obj<cell>(a, hint);
    c->type = kind::cell;
    ++t.cells;
    return c;
}

// Inserts b below the root, splitting a slot that holds a body into a new cell
// until the two bodies fall into different octants.
template <bench::policy P>
void insert(P& a, tree& t, body* b) {
    cell* c = t.root;
    double ctr[3] = {t.center[0], t.center[1], t.center[2]};
    double size = t.rsize;
    for (;;) {
        const int i = octant(b->pos, ctr);
        node* slot = c->subp[i];
        double sub[3];
        child_center(ctr, size / 2, i, sub);
        if (slot == nullptr) {
            c->subp[i] = b;
            return;
        }
        if (slot->type == kind::body) {
            if (size < t.rsize * 1e-12) {   // coincident bodies: give up splitting
                t.degenerate = true;
                return;
            }
            cell* nc = new_cell(a, c, t);
            nc->subp[octant(slot->pos, sub)] = slot;
            c->subp[i] = nc;
            c = nc;
        } else {
            c = static_cast<cell*>(slot);
        }
        for (int k = 0; k < 3; ++k) ctr[k] = sub[k];
        size /= 2;
    }
}

template <bench::policy P>
void build_tree(P& a, tree& t, body* bodies) {
    double lo[3], hi[3];
    for (int k = 0; k < 3; ++k) lo[k] = hi[k] = bodies->pos[k];
    for (const body* b = bodies; b != nullptr; b = b->next)
        for (int k = 0; k < 3; ++k) {
            if (b->pos[k] < lo[k]) lo[k] = b->pos[k];
            if (b->pos[k] > hi[k]) hi[k] = b->pos[k];
        }
    double extent = 0;
    for (int k = 0; k < 3; ++k) {
        t.center[k] = 0.5 * (lo[k] + hi[k]);
        if (hi[k] - lo[k] > extent) extent = hi[k] - lo[k];
    }
    t.rsize = extent * 1.0001 + 1e-12;
    t.root = new_cell(a, nullptr, t);
    for (body* b = bodies; b != nullptr; b = b->next) insert(a, t, b);
}

// Mass and centre of mass, bottom-up.
inline void center_of_mass(cell* c) {
    double m = 0, p[3] = {0, 0, 0};
    for (node* s : c->subp) {
        if (s == nullptr) continue;
        if (s->type == kind::cell) center_of_mass(static_cast<cell*>(s));
        m += s->mass;
        for (int k = 0; k < 3; ++k) p[k] += s->mass * s->pos[k];
    }
    c->mass = m;
    for (int k = 0; k < 3; ++k) c->pos[k] = m > 0 ? p[k] / m : 0.0;
}

inline void interact(body* b, const node* n, double acc[3], double& phi) {
    double d[3];
    for (int k = 0; k < 3; ++k) d[k] = n->pos[k] - b->pos[k];
    const double r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2] + eps * eps;
    const double rinv = 1.0 / std::sqrt(r2);
    const double mr = n->mass * rinv;
    phi -= mr;
    const double f = mr * rinv * rinv;
    for (int k = 0; k < 3; ++k) acc[k] += f * d[k];
}

inline void walk(body* b, const node* n, double size, double acc[3], double& phi) {
    if (n->type == kind::body) {
        if (n != b) interact(b, n, acc, phi);
        return;
    }
    double d[3];
    for (int k = 0; k < 3; ++k) d[k] = n->pos[k] - b->pos[k];
    const double dist2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
    if (size * size < theta * theta * dist2) {
        interact(b, n, acc, phi);
        return;
    }
    const cell* c = static_cast<const cell*>(n);
    for (const node* s : c->subp)
        if (s != nullptr) walk(b, s, size / 2, acc, phi);
}

inline void compute_forces(const tree& t, body* bodies) {
    for (body* b = bodies; b != nullptr; b = b->next) {
        double acc[3] = {0, 0, 0};
        double phi = 0;
        walk(b, t.root, t.rsize, acc, phi);
        for (int k = 0; k < 3; ++k) b->acc[k] = acc[k];
        b->phi = phi;
    }
}

template <bench::policy P>
void free_cells(P& a, cell* c) {
    for (node* s : c->subp)
        if (s != nullptr && s->type == kind::cell) free_cells(a, static_cast<cell*>(s));
    free_obj(a, c);
}

struct stats {
    bool degenerate = false;
    double root_mass = 0;
    std::uint64_t cells = 0;
};

// Builds the tree for the current positions, computes accelerations and
// potentials, and frees the tree again.
template <bench::policy P>
void gravity(P& a, body* bodies, stats& st) {
    tree t;
    build_tree(a, t, bodies);
    center_of_mass(t.root);
    compute_forces(t, bodies);
    st.degenerate = st.degenerate || t.degenerate;
    st.root_mass = t.root->mass;
    st.cells += t.cells;
    free_cells(a, t.root);
}

inline double energy(const body* bodies) {
    double kin = 0, pot = 0;
    for (const body* b = bodies; b != nullptr; b = b->next) {
        kin += 0.5 * b->mass * (b->vel[0] * b->vel[0] + b->vel[1] * b->vel[1] + b->vel[2] * b->vel[2]);
        pot += 0.5 * b->mass * b->phi;
    }
    return kin + pot;
}

// The whole program; run_bh below is its public entry point.
template <bench::policy P>
std::uint64_t run(P& alloc, scale s) {
    const params pr = problem_size(s);
    rng g(0x62682d706c756d6dULL);
    body* bodies = make_plummer(alloc, pr.nbody, g);

    stats st;
    std::string error;
    gravity(alloc, bodies, st);
    const double e0 = energy(bodies);
    const double dthf = 0.5 * dtime;
    for (int step = 0; step < pr.nsteps; ++step) {
        for (body* b = bodies; b != nullptr; b = b->next)
            for (int k = 0; k < 3; ++k) {
                b->vel[k] += dthf * b->acc[k];
                b->pos[k] += dtime * b->vel[k];
            }
        gravity(alloc, bodies, st);
        for (body* b = bodies; b != nullptr; b = b->next)
            for (int k = 0; k < 3; ++k) b->vel[k] += dthf * b->acc[k];
    }
    const double e1 = energy(bodies);

    double mom[3] = {0, 0, 0}, mom_abs = 0;
    bool finite = true;
    std::uint64_t h = combine(static_cast<std::uint64_t>(pr.nbody), st.cells);
    for (const body* b = bodies; b != nullptr; b = b->next) {
        for (int k = 0; k < 3; ++k) {
            finite = finite && std::isfinite(b->pos[k]) && std::isfinite(b->vel[k]) && std::isfinite(b->acc[k]);
            mom[k] += b->mass * b->vel[k];
            h = combine(h, std::bit_cast<std::uint64_t>(b->pos[k]));
            h = combine(h, std::bit_cast<std::uint64_t>(b->vel[k]));
        }
        mom_abs += b->mass * std::sqrt(b->vel[0] * b->vel[0] + b->vel[1] * b->vel[1] + b->vel[2] * b->vel[2]);
    }
    h = combine(h, std::bit_cast<std::uint64_t>(e1));
    const double mom_norm = std::sqrt(mom[0] * mom[0] + mom[1] * mom[1] + mom[2] * mom[2]);

    if (st.degenerate) error = "bh: coincident bodies";
    else if (!finite || !std::isfinite(e0) || !std::isfinite(e1)) error = "bh: non-finite body state";
    else if (std::fabs(st.root_mass - 1.0) > 1e-9) error = "bh: root cell does not hold the total mass";
    else if (!(e0 < -0.15 && e0 > -0.35)) error = "bh: initial energy is not that of a Plummer model";
    else if (std::fabs(e1 - e0) > 0.005 * std::fabs(e0)) error = "bh: energy not conserved";
    else if (mom_norm > 2e-3 * mom_abs) error = "bh: momentum not conserved";

    while (bodies != nullptr) {
        body* next = bodies->next;
        free_obj(alloc, bodies);
        bodies = next;
    }
    if (!error.empty()) throw std::runtime_error(error);
    return h;
}

} // namespace bh_impl

template <bench::policy P>
std::uint64_t run_bh(P& alloc, scale s) {
    return bh_impl::run(alloc, s);
}

} // namespace bench::olden
