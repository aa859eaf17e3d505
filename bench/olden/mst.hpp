// Olden mst: minimum spanning tree of a complete graph (Bentley's variant of
// Prim's algorithm). Every vertex keeps the weights of its edges in a small
// chained hash table keyed by the neighbouring vertex. The vertices not yet in
// the tree form a list; each round walks that list, looks the most recently
// inserted vertex up in every remaining vertex's hash table to lower its
// distance to the tree, and moves the closest vertex into the tree.
//
// Weights are a pure function of the unordered pair of vertex numbers, so the
// result is checked against an independent O(V^2) array-based Prim over the
// same function. Hashing uses vertex numbers, never addresses.
//
// Allocation: vertices as a list (hint: predecessor; the first has no
// neighbour); per vertex its bucket array (hint: the vertex); hash entries
// appended to their chain (hint: predecessor in the chain, or the bucket
// array for the first entry of a chain).
#pragma once
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

namespace mst_impl {

struct vertex;

struct hash_entry {
    vertex* key;
    int weight;
    hash_entry* next;
};

struct vertex {
    int mindist;
    int id;
    vertex* next;
    hash_entry** buckets;
    unsigned nbuckets;
};

inline constexpr int infinity = 0x7fffffff;
inline constexpr std::uint64_t weight_range = 2048;
inline constexpr int max_check_vertices = 8192;   // bound of the checker's local arrays

using olden::alloc_obj;
using olden::free_obj;
using olden::alloc_arr;
using olden::free_arr;

// Edge weight in [1, weight_range], symmetric in (i, j).
inline int compute_dist(int i, int j, int numvert, std::uint64_t seed) {
    const int lo = i < j ? i : j;
    const int hi = i < j ? j : i;
    const auto key = static_cast<std::uint64_t>(lo) * static_cast<std::uint64_t>(numvert) + static_cast<std::uint64_t>(hi);
    return static_cast<int>(mix64(key ^ seed) % weight_range) + 1;
}

inline unsigned bucket_of(const vertex* key, unsigned nbuckets) {
    return static_cast<unsigned>(mix64(static_cast<std::uint64_t>(key->id)) % nbuckets);
}

template <bench::policy P>
void hash_insert(P& a, vertex* owner, vertex* key, int weight) {
    hash_entry** slot = &owner->buckets[bucket_of(key, owner->nbuckets)];
    const void* hint = owner->buckets;
    while (*slot != nullptr) {
        hint = *slot;
        slot = &(*slot)->next;
    }
    hash_entry* e = alloc_obj<hash_entry>(a, hint);
    e->key = key;
    e->weight = weight;
    e->next = nullptr;
    *slot = e;
}

inline int hash_lookup(const vertex* owner, const vertex* key) {
    for (const hash_entry* e = owner->buckets[bucket_of(key, owner->nbuckets)]; e != nullptr; e = e->next)
        if (e->key == key) return e->weight;
    return -1;
}

template <bench::policy P>
vertex* make_graph(P& a, int numvert, std::uint64_t seed) {
    const unsigned nbuckets = numvert / 4 > 4 ? static_cast<unsigned>(numvert / 4) : 4U;
    vertex* first = nullptr;
    vertex* prev = nullptr;
    for (int i = 0; i < numvert; ++i) {
        vertex* v = alloc_obj<vertex>(a, prev);
        v->mindist = infinity;
        v->id = i;
        v->nbuckets = nbuckets;
        v->buckets = alloc_arr<hash_entry*>(a, nbuckets, v);
        if (prev != nullptr) prev->next = v;
        else first = v;
        prev = v;
    }
    for (vertex* v = first; v != nullptr; v = v->next)
        for (vertex* u = first; u != nullptr; u = u->next)
            if (u != v) hash_insert(a, v, u, compute_dist(v->id, u->id, numvert, seed));
    return first;
}

struct mst_result {
    std::int64_t cost = 0;
    int reached = 0;
    std::uint64_t order_hash = 0;
    bool missing_edge = false;
    vertex* done = nullptr;   // all vertices, in reverse order of insertion
};

// Prim's algorithm with the "blue rule" walk of the original.
inline mst_result compute_mst(vertex* graph) {
    mst_result res;
    vertex* inserted = graph;
    vertex* remaining = graph->next;
    inserted->next = nullptr;
    res.done = inserted;
    res.reached = 1;
    res.order_hash = combine(0, static_cast<std::uint64_t>(inserted->id));
    while (remaining != nullptr) {
        vertex* best = nullptr;
        vertex* best_prev = nullptr;
        int best_dist = infinity;
        vertex* prev = nullptr;
        for (vertex* v = remaining; v != nullptr; prev = v, v = v->next) {
            const int d = hash_lookup(v, inserted);
            if (d < 0) res.missing_edge = true;
            else if (d < v->mindist) v->mindist = d;
            if (v->mindist < best_dist) {
                best_dist = v->mindist;
                best = v;
                best_prev = prev;
            }
        }
        if (best == nullptr) break;   // cannot happen on a complete graph
        if (best_prev != nullptr) best_prev->next = best->next;
        else remaining = best->next;
        best->next = res.done;
        res.done = best;
        res.cost += best_dist;
        ++res.reached;
        res.order_hash = combine(res.order_hash, static_cast<std::uint64_t>(best->id) << 32 | static_cast<std::uint32_t>(best_dist));
        inserted = best;
    }
    // vertices left over (only if the walk broke off) still have to be freed
    while (remaining != nullptr) {
        vertex* v = remaining;
        remaining = v->next;
        v->next = res.done;
        res.done = v;
    }
    return res;
}

// Independent check: textbook O(V^2) Prim on local arrays over the weight function.
inline std::int64_t reference_mst(int numvert, std::uint64_t seed) {
    int dist[max_check_vertices];
    bool in_tree[max_check_vertices];
    for (int i = 0; i < numvert; ++i) {
        dist[i] = infinity;
        in_tree[i] = false;
    }
    std::int64_t cost = 0;
    int current = 0;
    in_tree[0] = true;
    for (int round = 1; round < numvert; ++round) {
        int best = -1;
        for (int i = 0; i < numvert; ++i) {
            if (in_tree[i]) continue;
            const int d = compute_dist(current, i, numvert, seed);
            if (d < dist[i]) dist[i] = d;
            if (best < 0 || dist[i] < dist[best]) best = i;
        }
        in_tree[best] = true;
        cost += dist[best];
        current = best;
    }
    return cost;
}

template <bench::policy P>
void release(P& a, vertex* list) {
    while (list != nullptr) {
        vertex* next = list->next;
        for (unsigned b = 0; b < list->nbuckets; ++b) {
            hash_entry* e = list->buckets[b];
            while (e != nullptr) {
                hash_entry* n = e->next;
                free_obj(a, e);
                e = n;
            }
        }
        free_arr(a, list->buckets, list->nbuckets);
        free_obj(a, list);
        list = next;
    }
}

inline int problem_size(scale s) {
    switch (s) {
    case scale::quick: return 1024;
    case scale::standard: return 1792;
    case scale::full: return 2048;   // paper: 2048 vertices
    }
    return 0;
}

// The whole program; run_mst below is its public entry point.
template <bench::policy P>
std::uint64_t run(P& alloc, scale s) {
    const int numvert = problem_size(s);
    if (numvert < 2 || numvert > max_check_vertices) throw std::runtime_error("mst: unsupported vertex count");
    const std::uint64_t seed = 0x6d7374ULL;

    vertex* graph = make_graph(alloc, numvert, seed);
    const mst_result res = compute_mst(graph);
    release(alloc, res.done);

    std::string error;
    if (res.missing_edge) error = "mst: edge missing from a vertex's hash table";
    else if (res.reached != numvert) error = "mst: not every vertex was reached";
    else if (res.cost != reference_mst(numvert, seed)) error = "mst: weight differs from the reference Prim";
    if (!error.empty()) throw std::runtime_error(error);
    return combine(combine(static_cast<std::uint64_t>(res.cost), static_cast<std::uint64_t>(res.reached)), res.order_hash);
}

} // namespace mst_impl

template <bench::policy P>
std::uint64_t run_mst(P& alloc, scale s) {
    return mst_impl::run(alloc, s);
}

} // namespace bench::olden
