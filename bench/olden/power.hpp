// power (Olden): decentralised optimal pricing of a power distribution system.
//
// The network is a tree: the root (the generating plant) feeds a number of
// feeders; a feeder is a chain of laterals, each lateral carries a chain of
// branches, and each branch serves ten leaves (customers). Every lateral and
// branch is a line segment with resistance R and reactance X that loses
// R (P^2 + Q^2) real and X (P^2 + Q^2) reactive power when it carries the
// demand (P, Q) of everything downstream of it.
//
// One pass over the tree, given the plant's prices (theta_R, theta_I):
//   * prices flow down: the price at the far end of a segment is the near-end
//     price times the marginal loss of the segment (computed from the flow of
//     the previous pass);
//   * every customer maximises its utility minus its bill, a concave 2-d
//     problem solved with a few Newton steps from the previous solution;
//   * demands flow up: a segment's demand is what it feeds plus its losses.
// The plant then moves its prices towards its marginal generation cost for
// the demand it sees. The iteration stops when prices and demand are stable.
//
// Objects: root, feeder array (near the root), laterals (near their parent:
// the root for the first of a feeder, else the previous lateral), branches
// (near the lateral or previous branch), per-branch leaf arrays (near the
// branch) and leaves (near their branch).
//
// Checks: convergence within the iteration budget; demand balance (the
// plant's demand equals the customers' demand plus every line loss, summed by
// an independent walk); the plant's prices equal its marginal cost; every
// customer's first-order optimality conditions hold at its local prices.
#pragma once
#include <cmath>
#include <cstdint>
#include <new>
#include <stdexcept>

#include "common/policy.hpp"
#include "olden/rng.hpp"
#include "olden/scale.hpp"

namespace bench::olden {

namespace power_detail {

struct demand {
    double P;
    double Q;
};

struct leaf {
    demand D;
    double pi_R, pi_I; // prices seen at the connection point
    double a, b;       // utility coefficients of this customer
};

struct branch {
    demand D;
    double R, X;             // line impedance
    branch* next;            // next branch along the lateral
    leaf** leaves;           // per-branch array of leaves_per_branch customers
};

struct lateral {
    demand D;
    double R, X;             // line impedance
    lateral* next;           // next lateral along the feeder
    branch* branches;        // first branch of this lateral
};

struct root {
    demand D;
    double theta_R, theta_I; // plant prices
    double c_R, c_I;         // generation cost: c/2 * P^2
    lateral** feeders;       // per-root array of feeders
};

struct shape {
    int feeders;
    int laterals;  // per feeder
    int branches;  // per lateral
    int leaves;    // per branch
};

// Utility u(P, Q) = a ln(1+P) + b ln(1+Q) - k_c (P - Q)^2 is concave; the
// customer buys the (P, Q) >= 0 that maximises u - pi_R P - pi_I Q.
inline constexpr double k_coupling = 0.05;

inline void optimise_leaf(leaf& l) {
    double P = l.D.P, Q = l.D.Q;
    for (int it = 0; it < 50; ++it) {
        const double d = P - Q;
        const double gP = l.a / (1 + P) - 2 * k_coupling * d - l.pi_R;
        const double gQ = l.b / (1 + Q) + 2 * k_coupling * d - l.pi_I;
        const double hPP = -l.a / ((1 + P) * (1 + P)) - 2 * k_coupling;
        const double hQQ = -l.b / ((1 + Q) * (1 + Q)) - 2 * k_coupling;
        const double hPQ = 2 * k_coupling;
        const double det = hPP * hQQ - hPQ * hPQ;
        double dP = -(hQQ * gP - hPQ * gQ) / det;
        double dQ = -(hPP * gQ - hPQ * gP) / det;
        double nP = P + dP, nQ = Q + dQ;
        if (nP < 0) nP = 0;
        if (nQ < 0) nQ = 0;
        const double step = std::fabs(nP - P) + std::fabs(nQ - Q);
        P = nP;
        Q = nQ;
        if (step < 1e-13 * (1 + P + Q)) break;
    }
    l.D = {P, Q};
}

// First-order conditions of a customer (projected gradient is zero).
inline bool leaf_optimal(const leaf& l) {
    const double d = l.D.P - l.D.Q;
    const double gP = l.a / (1 + l.D.P) - 2 * k_coupling * d - l.pi_R;
    const double gQ = l.b / (1 + l.D.Q) + 2 * k_coupling * d - l.pi_I;
    const double tol = 1e-9;
    const bool okP = l.D.P > 0 ? std::fabs(gP) < tol : gP <= tol;
    const bool okQ = l.D.Q > 0 ? std::fabs(gQ) < tol : gQ <= tol;
    return okP && okQ;
}

// Demand entering a segment of impedance (R, X) that feeds `out`.
inline demand with_losses(demand out, double R, double X) {
    const double s = out.P * out.P + out.Q * out.Q;
    return {out.P + R * s, out.Q + X * s};
}

// Prices at the far end of a segment carrying `flow`, from near-end prices.
inline void downstream_prices(double R, double X, demand flow, double& pR, double& pI) {
    const double nR = pR * (1 + 2 * R * flow.P) + pI * (2 * X * flow.P);
    const double nI = pR * (2 * R * flow.Q) + pI * (1 + 2 * X * flow.Q);
    pR = nR;
    pI = nI;
}

inline demand compute_branch(branch* b, double pR, double pI, int nleaves) {
    // Prices along the chain use the flows of the previous pass; demands are
    // accumulated from the far end back (recursion: the chains are short).
    downstream_prices(b->R, b->X, b->D, pR, pI);
    demand fed{0, 0};
    if (b->next != nullptr) {
        const demand d = compute_branch(b->next, pR, pI, nleaves);
        fed.P += d.P;
        fed.Q += d.Q;
    }
    for (int i = 0; i < nleaves; ++i) {
        leaf& l = *b->leaves[i];
        l.pi_R = pR;
        l.pi_I = pI;
        optimise_leaf(l);
        fed.P += l.D.P;
        fed.Q += l.D.Q;
    }
    b->D = with_losses(fed, b->R, b->X);
    return b->D;
}

inline demand compute_lateral(lateral* l, double pR, double pI, int nleaves) {
    downstream_prices(l->R, l->X, l->D, pR, pI);
    demand fed{0, 0};
    if (l->next != nullptr) {
        const demand d = compute_lateral(l->next, pR, pI, nleaves);
        fed.P += d.P;
        fed.Q += d.Q;
    }
    const demand d = compute_branch(l->branches, pR, pI, nleaves);
    fed.P += d.P;
    fed.Q += d.Q;
    l->D = with_losses(fed, l->R, l->X);
    return l->D;
}

inline demand compute_tree(root& r, const shape& sh) {
    demand total{0, 0};
    for (int f = 0; f < sh.feeders; ++f) {
        const demand d = compute_lateral(r.feeders[f], r.theta_R, r.theta_I, sh.leaves);
        total.P += d.P;
        total.Q += d.Q;
    }
    r.D = total;
    return total;
}

// Independent verification walk: sum of customer demand and of line losses.
struct audit {
    double leafP = 0, leafQ = 0, lossP = 0, lossQ = 0;
    std::uint64_t leaves = 0;
    bool optimal = true;
};

inline void audit_branch(const branch* b, int nleaves, audit& a) {
    for (; b != nullptr; b = b->next) {
        demand fed{0, 0};
        if (b->next != nullptr) fed = b->next->D;
        for (int i = 0; i < nleaves; ++i) {
            const leaf& l = *b->leaves[i];
            a.leafP += l.D.P;
            a.leafQ += l.D.Q;
            fed.P += l.D.P;
            fed.Q += l.D.Q;
            a.optimal = a.optimal && leaf_optimal(l);
            ++a.leaves;
        }
        const double s = fed.P * fed.P + fed.Q * fed.Q;
        a.lossP += b->R * s;
        a.lossQ += b->X * s;
    }
}

inline void audit_lateral(const lateral* l, int nleaves, audit& a) {
    for (; l != nullptr; l = l->next) {
        demand fed = l->branches->D;
        if (l->next != nullptr) {
            fed.P += l->next->D.P;
            fed.Q += l->next->D.Q;
        }
        const double s = fed.P * fed.P + fed.Q * fed.Q;
        a.lossP += l->R * s;
        a.lossQ += l->X * s;
        audit_branch(l->branches, nleaves, a);
    }
}

template <bench::policy P, class T>
T* make(P& alloc, const void* hint, const T& init) {
    return new (alloc.allocate(sizeof(T), hint)) T(init);
}

template <bench::policy P, class T>
void drop(P& alloc, T* p) {
    p->~T();
    alloc.deallocate(p, sizeof(T));
}

template <bench::policy P>
branch* build_branches(P& alloc, const void* hint, const shape& sh, rng& g) {
    branch* first = nullptr;
    branch* prev = nullptr;
    for (int i = 0; i < sh.branches; ++i) {
        branch* b = make(alloc, prev != nullptr ? static_cast<const void*>(prev) : hint,
                         branch{{0, 0}, g.uniform(1e-5, 4e-5), g.uniform(2e-5, 8e-5), nullptr, nullptr});
        b->leaves = static_cast<leaf**>(alloc.allocate(sizeof(leaf*) * static_cast<std::size_t>(sh.leaves), b));
        for (int j = 0; j < sh.leaves; ++j) {
            // Warm start: what the customer would buy at prices (0.5, 0.25).
            const double a = g.uniform(1.0, 2.0), bb = g.uniform(0.5, 1.0);
            b->leaves[j] = make(alloc, b, leaf{{a / 0.5 - 1, bb / 0.25 - 1}, 0.5, 0.25, a, bb});
        }
        if (prev != nullptr) prev->next = b;
        else first = b;
        prev = b;
    }
    return first;
}

template <bench::policy P>
lateral* build_feeder(P& alloc, const void* hint, const shape& sh, rng& g) {
    lateral* first = nullptr;
    lateral* prev = nullptr;
    for (int i = 0; i < sh.laterals; ++i) {
        lateral* l = make(alloc, prev != nullptr ? static_cast<const void*>(prev) : hint,
                          lateral{{0, 0}, g.uniform(0.5e-6, 1.5e-6), g.uniform(1e-6, 3e-6), nullptr, nullptr});
        l->branches = build_branches(alloc, l, sh, g);
        if (prev != nullptr) prev->next = l;
        else first = l;
        prev = l;
    }
    return first;
}

template <bench::policy P>
void free_feeder(P& alloc, lateral* l, const shape& sh) {
    while (l != nullptr) {
        lateral* ln = l->next;
        branch* b = l->branches;
        while (b != nullptr) {
            branch* bn = b->next;
            for (int j = 0; j < sh.leaves; ++j) drop(alloc, b->leaves[j]);
            alloc.deallocate(b->leaves, sizeof(leaf*) * static_cast<std::size_t>(sh.leaves));
            drop(alloc, b);
            b = bn;
        }
        drop(alloc, l);
        l = ln;
    }
}

inline shape power_shape(scale s) {
    switch (s) {
    case scale::quick: return {60, 20, 5, 10};
    case scale::standard: return {250, 20, 5, 10};
    case scale::full: return {10, 20, 5, 10}; // Olden's default
    }
    return {10, 20, 5, 10};
}

} // namespace power_detail

template <bench::policy P>
std::uint64_t run_power(P& alloc, scale s) {
    using namespace power_detail;
    const shape sh = power_shape(s);
    const double nleaves = double(sh.feeders) * sh.laterals * sh.branches * sh.leaves;
    rng g(0x706f776572ULL);

    root* r = make(alloc, nullptr, root{{0, 0}, 0.5, 0.25, 0.5 / (2 * nleaves), 0.25 / (2 * nleaves), nullptr});
    r->feeders = static_cast<lateral**>(alloc.allocate(sizeof(lateral*) * static_cast<std::size_t>(sh.feeders), r));
    for (int f = 0; f < sh.feeders; ++f) r->feeders[f] = build_feeder(alloc, r, sh, g);

    // Price iteration at the plant: a damped fixed point theta = c * D(theta).
    int iterations = 0;
    bool converged = false;
    demand prev{0, 0};
    constexpr int max_iterations = 400;
    while (iterations < max_iterations) {
        const demand d = compute_tree(*r, sh);
        ++iterations;
        const double targetR = r->c_R * d.P, targetI = r->c_I * d.Q;
        const double change = std::fabs(targetR - r->theta_R) / r->theta_R + std::fabs(targetI - r->theta_I) / r->theta_I +
                              std::fabs(d.P - prev.P) / d.P + std::fabs(d.Q - prev.Q) / d.Q;
        prev = d;
        if (change < 1e-11) {
            converged = true;
            break;
        }
        r->theta_R += 0.3 * (targetR - r->theta_R);
        r->theta_I += 0.3 * (targetI - r->theta_I);
    }

    audit a;
    for (int f = 0; f < sh.feeders; ++f) audit_lateral(r->feeders[f], sh.leaves, a);
    const demand D = r->D;
    const double thR = r->theta_R, thI = r->theta_I, cR = r->c_R, cI = r->c_I;

    for (int f = 0; f < sh.feeders; ++f) free_feeder(alloc, r->feeders[f], sh);
    alloc.deallocate(r->feeders, sizeof(lateral*) * static_cast<std::size_t>(sh.feeders));
    drop(alloc, r);

    if (!converged) throw std::runtime_error("power: price iteration did not converge");
    if (!(std::isfinite(D.P) && std::isfinite(D.Q)) || D.P <= 0 || D.Q <= 0)
        throw std::runtime_error("power: non-physical total demand");
    if (std::fabs(a.leafP + a.lossP - D.P) > 1e-9 * D.P || std::fabs(a.leafQ + a.lossQ - D.Q) > 1e-9 * D.Q)
        throw std::runtime_error("power: demand balance violated (customers + losses != plant)");
    if (std::fabs(cR * D.P - thR) > 1e-9 * thR || std::fabs(cI * D.Q - thI) > 1e-9 * thI)
        throw std::runtime_error("power: plant price differs from marginal cost");
    if (!(a.lossP > 0 && a.lossP < 0.2 * D.P && a.lossQ > 0 && a.lossQ < 0.2 * D.Q))
        throw std::runtime_error("power: line losses outside (0, 20 %) of the demand");
    if (!a.optimal) throw std::runtime_error("power: a customer is not at its optimum");
    if (a.leaves != static_cast<std::uint64_t>(nleaves)) throw std::runtime_error("power: leaf count");

    // Quantise to keep the checksum insensitive to the last bits.
    auto q = [](double x) { return static_cast<std::uint64_t>(std::llround(x * 1e6)); };
    std::uint64_t h = combine(0x706f776572000000ULL, static_cast<std::uint64_t>(iterations));
    h = combine(h, q(thR * 1e3));
    h = combine(h, q(thI * 1e3));
    h = combine(h, q(D.P / nleaves));
    h = combine(h, q(D.Q / nleaves));
    h = combine(h, q(a.lossP / nleaves));
    return h;
}

} // namespace bench::olden
