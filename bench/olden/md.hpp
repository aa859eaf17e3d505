// md: a small molecular-dynamics code (the second STL workload of the
// allotheque paper), written with standard containers over
// bench::stl_allocator so every container node comes from the policy.
//
// N particles in a periodic cube interact through the purely repulsive
// Weeks-Chandler-Andersen potential (Lennard-Jones cut at its minimum
// 2^(1/6) and shifted to zero). Time stepping is velocity Verlet. The box is
// divided into cells no smaller than the neighbour-list radius; the cells are
// a std::map from cell number to a std::list of the particles in it (a cell
// is erased when it empties and re-created when a particle enters it), and
// every particle keeps a Verlet neighbour list (std::list of the neighbours
// with a larger index within cut-off + skin), rebuilt from the cells
// whenever some particle has moved more than half the skin since the last
// rebuild.
//
// Checks: the cells hold every particle exactly once, in the cell of its
// position; total momentum stays zero (pair forces cancel); total energy is
// conserved within a tolerance; the neighbour lists contain every pair
// closer than the cut-off (brute-force count).
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <stdexcept>
#include <utility>
#include <vector>

#include "common/policy.hpp"
#include "common/stl_adapter.hpp"
#include "olden/rng.hpp"
#include "olden/scale.hpp"

namespace bench::olden {

namespace md_detail {

struct particle {
    double x[3];  // position in [0, L)
    double v[3];
    double f[3];
    double x0[3]; // position at the last neighbour-list rebuild
    std::uint32_t cell;
};

struct params {
    int side;  // N = side^3 particles on a jittered cubic lattice
    int steps;
};

inline params md_params(scale s) {
    switch (s) {
    case scale::quick: return {8, 900};
    case scale::standard: return {12, 700};
    case scale::full: return {8, 4400};
    }
    return {8, 900};
}

inline constexpr double density = 0.8;
inline constexpr double temperature = 1.0;
inline constexpr double dt = 0.004;
inline const double rcut = std::pow(2.0, 1.0 / 6.0);
inline constexpr double skin = 0.3;

template <class T, class P>
using alloc_t = bench::stl_allocator<T, P>;
template <class P>
using index_list = std::list<std::uint32_t, alloc_t<std::uint32_t, P>>;
template <class P>
using cell_map = std::map<std::uint32_t, index_list<P>, std::less<std::uint32_t>,
                          alloc_t<std::pair<const std::uint32_t, index_list<P>>, P>>;

// Minimum-image difference along one axis.
inline double wrap_delta(double d, double L) {
    if (d > 0.5 * L) return d - L;
    if (d < -0.5 * L) return d + L;
    return d;
}

} // namespace md_detail

template <bench::policy P>
std::uint64_t run_md(P& alloc, scale s) {
    using namespace md_detail;
    const params pr = md_params(s);
    const auto n = static_cast<std::uint32_t>(pr.side * pr.side * pr.side);
    const double L = std::cbrt(n / density);
    const double rlist = rcut + skin;
    const int m = static_cast<int>(L / rlist); // cells per dimension
    if (m < 3) throw std::logic_error("md: box too small for the cell method");
    const double csize = L / m;
    const double rc2 = rcut * rcut, rl2 = rlist * rlist;

    bench::stl_context<P> ctx(alloc);
    const alloc_t<std::uint32_t, P> ia(ctx);

    auto cell_coord = [&](double x) {
        int c = static_cast<int>(x / csize);
        return c < 0 ? 0 : (c >= m ? m - 1 : c);
    };
    auto cell_of = [&](const double* x) {
        return static_cast<std::uint32_t>((cell_coord(x[0]) * m + cell_coord(x[1])) * m + cell_coord(x[2]));
    };

    std::uint64_t rebuilds = 0, migrations = 0, pairs_listed = 0;
    bool cells_ok = true, lists_complete = true;
    double p_total[3] = {0, 0, 0}, e0 = 0, e1 = 0;
    {
        std::vector<particle, alloc_t<particle, P>> parts{alloc_t<particle, P>(ctx)};
        parts.reserve(n);
        cell_map<P> cells{alloc_t<std::pair<const std::uint32_t, index_list<P>>, P>(ctx)};
        std::vector<index_list<P>, alloc_t<index_list<P>, P>> nbr{alloc_t<index_list<P>, P>(ctx)};
        nbr.reserve(n);

        // Jittered cubic lattice, random velocities with zero total momentum
        // scaled to the target temperature.
        rng g(0x6d6f6c6479ULL);
        const double a = L / pr.side;
        double vsum[3] = {0, 0, 0};
        for (int i = 0; i < pr.side; ++i)
            for (int j = 0; j < pr.side; ++j)
                for (int k = 0; k < pr.side; ++k) {
                    particle p{};
                    const int c[3] = {i, j, k};
                    for (int d = 0; d < 3; ++d) {
                        p.x[d] = (c[d] + 0.5 + g.uniform(-0.05, 0.05)) * a;
                        p.v[d] = g.uniform(-1, 1);
                        vsum[d] += p.v[d];
                    }
                    parts.push_back(p);
                }
        double ke = 0;
        for (particle& p : parts)
            for (int d = 0; d < 3; ++d) {
                p.v[d] -= vsum[d] / n;
                ke += 0.5 * p.v[d] * p.v[d];
            }
        const double vscale = std::sqrt(1.5 * n * temperature / ke);
        for (particle& p : parts)
            for (double& v : p.v) v *= vscale;

        for (std::uint32_t i = 0; i < n; ++i) {
            parts[i].cell = cell_of(parts[i].x);
            cells.try_emplace(parts[i].cell, ia).first->second.push_back(i);
            nbr.emplace_back(ia);
        }

        auto rebuild = [&] {
            ++rebuilds;
            for (auto& l : nbr) l.clear();
            for (std::uint32_t i = 0; i < n; ++i) {
                particle& p = parts[i];
                for (int d = 0; d < 3; ++d) p.x0[d] = p.x[d];
                const int cx = cell_coord(p.x[0]), cy = cell_coord(p.x[1]), cz = cell_coord(p.x[2]);
                for (int dx = -1; dx <= 1; ++dx)
                    for (int dy = -1; dy <= 1; ++dy)
                        for (int dz = -1; dz <= 1; ++dz) {
                            const auto id = static_cast<std::uint32_t>((((cx + dx + m) % m) * m + (cy + dy + m) % m) * m +
                                                                       (cz + dz + m) % m);
                            const auto it = cells.find(id);
                            if (it == cells.end()) continue;
                            for (const std::uint32_t j : it->second) {
                                if (j <= i) continue;
                                double r2 = 0;
                                for (int d = 0; d < 3; ++d) {
                                    const double dd = wrap_delta(p.x[d] - parts[j].x[d], L);
                                    r2 += dd * dd;
                                }
                                if (r2 < rl2) nbr[i].push_back(j);
                            }
                        }
            }
        };

        // Forces; returns the potential energy.
        auto forces = [&] {
            for (particle& p : parts)
                for (double& f : p.f) f = 0;
            double pot = 0;
            for (std::uint32_t i = 0; i < n; ++i) {
                particle& p = parts[i];
                for (const std::uint32_t j : nbr[i]) {
                    particle& q = parts[j];
                    double dx[3], r2 = 0;
                    for (int d = 0; d < 3; ++d) {
                        dx[d] = wrap_delta(p.x[d] - q.x[d], L);
                        r2 += dx[d] * dx[d];
                    }
                    if (r2 >= rc2) continue;
                    const double inv2 = 1 / r2, inv6 = inv2 * inv2 * inv2;
                    const double fs = 24 * inv6 * (2 * inv6 - 1) * inv2;
                    pot += 4 * inv6 * (inv6 - 1) + 1;
                    for (int d = 0; d < 3; ++d) {
                        p.f[d] += fs * dx[d];
                        q.f[d] -= fs * dx[d];
                    }
                }
            }
            return pot;
        };
        auto kinetic = [&] {
            double k = 0;
            for (const particle& p : parts)
                for (double v : p.v) k += 0.5 * v * v;
            return k;
        };

        rebuild();
        e0 = forces() + kinetic();
        double pot = 0;
        for (int step = 0; step < pr.steps; ++step) {
            double maxd2 = 0;
            for (std::uint32_t i = 0; i < n; ++i) {
                particle& p = parts[i];
                double d2 = 0;
                for (int d = 0; d < 3; ++d) {
                    p.v[d] += 0.5 * dt * p.f[d];
                    p.x[d] += dt * p.v[d];
                    p.x[d] -= L * std::floor(p.x[d] / L);
                    if (p.x[d] >= L) p.x[d] = 0; // rounding of a tiny negative coordinate
                    const double dd = wrap_delta(p.x[d] - p.x0[d], L);
                    d2 += dd * dd;
                }
                if (d2 > maxd2) maxd2 = d2;
                const std::uint32_t c = cell_of(p.x);
                if (c != p.cell) {
                    ++migrations;
                    const auto old = cells.find(p.cell);
                    old->second.remove(i);
                    if (old->second.empty()) cells.erase(old);
                    cells.try_emplace(c, ia).first->second.push_back(i);
                    p.cell = c;
                }
            }
            if (4 * maxd2 > skin * skin) rebuild();
            pot = forces();
            for (particle& p : parts)
                for (int d = 0; d < 3; ++d) p.v[d] += 0.5 * dt * p.f[d];
        }
        e1 = pot + kinetic();

        // Audit: cells, momentum, neighbour-list completeness.
        std::uint64_t counted = 0;
        std::vector<std::uint32_t, alloc_t<std::uint32_t, P>> seen(n, 0, ia);
        for (const auto& [id, members] : cells) {
            if (members.empty()) cells_ok = false;
            for (const std::uint32_t i : members) {
                ++counted;
                if (i >= n || ++seen[i] != 1 || parts[i].cell != id || cell_of(parts[i].x) != id) cells_ok = false;
            }
        }
        cells_ok = cells_ok && counted == n;
        for (const particle& p : parts)
            for (int d = 0; d < 3; ++d) p_total[d] += p.v[d];
        std::uint64_t close_listed = 0, close_all = 0;
        for (std::uint32_t i = 0; i < n; ++i) {
            pairs_listed += nbr[i].size();
            for (const std::uint32_t j : nbr[i]) {
                double r2 = 0;
                for (int d = 0; d < 3; ++d) {
                    const double dd = wrap_delta(parts[i].x[d] - parts[j].x[d], L);
                    r2 += dd * dd;
                }
                if (r2 < rc2) ++close_listed;
            }
            for (std::uint32_t j = i + 1; j < n; ++j) {
                double r2 = 0;
                for (int d = 0; d < 3; ++d) {
                    const double dd = wrap_delta(parts[i].x[d] - parts[j].x[d], L);
                    r2 += dd * dd;
                }
                if (r2 < rc2) ++close_all;
            }
        }
        lists_complete = close_listed == close_all;
    }

    if (!cells_ok) throw std::runtime_error("md: particle count or cell membership wrong");
    for (double p : p_total)
        if (!(std::fabs(p) < 1e-9 * n)) throw std::runtime_error("md: momentum not conserved");
    if (!(std::fabs(e1 - e0) < 0.01 * std::fabs(e0))) throw std::runtime_error("md: energy not conserved");
    if (!lists_complete) throw std::runtime_error("md: a neighbour list misses an interacting pair");

    std::uint64_t h = combine(0x6d64000000000000ULL, n);
    h = combine(h, static_cast<std::uint64_t>(pr.steps));
    h = combine(h, rebuilds);
    h = combine(h, migrations);
    h = combine(h, pairs_listed);
    h = combine(h, static_cast<std::uint64_t>(std::llround(e1 / n * 1e6)));
    return h;
}

} // namespace bench::olden
