// Olden em3d: propagation of electromagnetic waves through a 3-D object,
// modelled as a bipartite graph of E (electric field) and H (magnetic field)
// nodes. Every node points to `degree` nodes of the other kind; each node then
// holds, for every node that points to it, a pointer to that node's value and
// a coefficient. One iteration recomputes all E values from H values and then
// all H values from E values: value -= coeff[i] * *from_value[i].
//
// "Local" neighbours (a fraction `local_percent` of the edges) are drawn from a
// window of nearby indices of the other table; the others uniformly from the
// whole table. A node never gets the same neighbour twice.
//
// Allocation: the two node tables (arrays of node pointers, no neighbour:
// hint nullptr); the nodes of each kind as a list (hint: predecessor, the
// table for the first); per node, its to_nodes, from_values and coeffs arrays
// (hint: the node). Everything is released at the end.
#pragma once
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>

#include "objects.hpp"
#include "../common/policy.hpp"
#include "rng.hpp"
#include "scale.hpp"

namespace bench::olden {

namespace em3d_impl {

struct node {
    double value;
    node* next;
    node** to_nodes;        // `degree` nodes of the other kind
    double** from_values;   // values of the nodes pointing here
    double* coeffs;         // one coefficient per from_value
    int from_count;         // in-degree
    int from_length;        // entries filled so far
};

using olden::alloc_obj;
using olden::free_obj;
using olden::alloc_arr;
using olden::free_arr;

struct params {
    int nodes;          // per kind (E and H each)
    int degree;
    int local_percent;
    int iterations;
};

inline params problem_size(scale s) {
    switch (s) {
    case scale::quick: return {6'000, 100, 75, 10};
    case scale::standard: return {30'000, 100, 75, 10};
    case scale::full: return {70'000, 100, 75, 10};   // paper: 70,000 nodes, degree 100, 75 % local
    }
    return {0, 0, 0, 0};
}

// Creates `n` nodes linked in a list and records them in a table.
template <bench::policy P>
node** make_nodes(P& a, int n, rng& r) {
    node** table = alloc_arr<node*>(a, static_cast<std::size_t>(n), nullptr);
    node* prev = nullptr;
    for (int i = 0; i < n; ++i) {
        node* x = alloc_obj<node>(a, prev != nullptr ? static_cast<const void*>(prev) : table);
        x->value = r.uniform();
        if (prev != nullptr) prev->next = x;
        table[i] = x;
        prev = x;
    }
    return table;
}

// Gives every node of `from` its to_nodes array pointing into `to`.
template <bench::policy P>
void make_neighbours(P& a, node** from, node** to, const params& pr, rng& r) {
    const auto n = static_cast<std::uint64_t>(pr.nodes);
    const auto window = static_cast<std::uint64_t>(2 * pr.degree + 1);
    for (std::uint64_t i = 0; i < n; ++i) {
        node* x = from[i];
        x->to_nodes = alloc_arr<node*>(a, static_cast<std::size_t>(pr.degree), x);
        for (int j = 0; j < pr.degree; ++j) {
            node* other;
            bool duplicate;
            do {
                std::uint64_t k;
                if (r.below(100) < static_cast<std::uint64_t>(pr.local_percent))
                    k = (i + n - static_cast<std::uint64_t>(pr.degree) + r.below(window)) % n;
                else
                    k = r.below(n);
                other = to[k];
                duplicate = false;
                for (int q = 0; q < j; ++q)
                    if (x->to_nodes[q] == other) {
                        duplicate = true;
                        break;
                    }
            } while (duplicate);
            x->to_nodes[j] = other;
            ++other->from_count;
        }
    }
}

template <bench::policy P>
void make_from_arrays(P& a, node* list) {
    for (node* x = list; x != nullptr; x = x->next) {
        if (x->from_count == 0) continue;
        const auto c = static_cast<std::size_t>(x->from_count);
        x->from_values = alloc_arr<double*>(a, c, x);
        x->coeffs = alloc_arr<double>(a, c, x);
    }
}

// Every node of `list` registers its value (and a coefficient) with each of
// its neighbours.
inline void fill_from_fields(node* list, int degree, rng& r) {
    const double scale_factor = 1.0 / degree;
    for (node* x = list; x != nullptr; x = x->next) {
        for (int j = 0; j < degree; ++j) {
            node* other = x->to_nodes[j];
            const int slot = other->from_length++;
            other->from_values[slot] = &x->value;
            other->coeffs[slot] = r.uniform() * scale_factor;
        }
    }
}

inline void compute_nodes(node* list) {
    for (node* x = list; x != nullptr; x = x->next) {
        double v = x->value;
        for (int i = 0; i < x->from_count; ++i) v -= x->coeffs[i] * *x->from_values[i];
        x->value = v;
    }
}

template <bench::policy P>
void release(P& a, node** table, int n, int degree) {
    if (table == nullptr) return;
    for (int i = 0; i < n; ++i) {
        node* x = table[i];
        if (x == nullptr) continue;
        const auto c = static_cast<std::size_t>(x->from_count);
        if (x->coeffs != nullptr) free_arr(a, x->coeffs, c);
        if (x->from_values != nullptr) free_arr(a, x->from_values, c);
        if (x->to_nodes != nullptr) free_arr(a, x->to_nodes, static_cast<std::size_t>(degree));
        free_obj(a, x);
    }
    free_arr(a, table, static_cast<std::size_t>(n));
}

// The whole program; run_em3d below is its public entry point.
template <bench::policy P>
std::uint64_t run(P& alloc, scale s) {
    const params pr = problem_size(s);
    if (pr.nodes <= 2 * pr.degree + 1) throw std::runtime_error("em3d: too few nodes for the degree");
    rng r(0x656d3364ULL);

    node** e_table = make_nodes(alloc, pr.nodes, r);
    node** h_table = make_nodes(alloc, pr.nodes, r);
    node* e_list = e_table[0];
    node* h_list = h_table[0];
    make_neighbours(alloc, e_table, h_table, pr, r);
    make_neighbours(alloc, h_table, e_table, pr, r);
    make_from_arrays(alloc, e_list);
    make_from_arrays(alloc, h_list);
    fill_from_fields(e_list, pr.degree, r);
    fill_from_fields(h_list, pr.degree, r);

    std::string error;
    const std::int64_t expected_edges = static_cast<std::int64_t>(pr.nodes) * pr.degree;
    std::int64_t in_e = 0, in_h = 0;
    for (node* x = e_list; x != nullptr; x = x->next) {
        in_e += x->from_count;
        if (x->from_length != x->from_count) error = "em3d: incomplete from-array";
    }
    for (node* x = h_list; x != nullptr; x = x->next) {
        in_h += x->from_count;
        if (x->from_length != x->from_count) error = "em3d: incomplete from-array";
    }
    if (in_e != expected_edges || in_h != expected_edges) error = "em3d: edge count mismatch";

    for (int it = 0; it < pr.iterations; ++it) {
        compute_nodes(e_list);
        compute_nodes(h_list);
    }

    std::uint64_t h = combine(static_cast<std::uint64_t>(in_e), static_cast<std::uint64_t>(in_h));
    double sum = 0.0;
    for (node* list : {e_list, h_list}) {
        for (node* x = list; x != nullptr; x = x->next) {
            if (!std::isfinite(x->value)) error = "em3d: non-finite value";
            sum += x->value;
            h = combine(h, std::bit_cast<std::uint64_t>(x->value));
        }
    }
    if (!std::isfinite(sum)) error = "em3d: non-finite value sum";
    h = combine(h, std::bit_cast<std::uint64_t>(sum));

    release(alloc, e_table, pr.nodes, pr.degree);
    release(alloc, h_table, pr.nodes, pr.degree);
    if (!error.empty()) throw std::runtime_error(error);
    return h;
}

} // namespace em3d_impl

template <bench::policy P>
std::uint64_t run_em3d(P& alloc, scale s) {
    return em3d_impl::run(alloc, s);
}

} // namespace bench::olden
