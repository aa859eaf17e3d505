// Olden bisort: adaptive bitonic sort (Bilardi & Nicolau) of the values held
// in a complete binary tree, sorting forward and then backward.
//
// The sequence being sorted is the in-order traversal of the tree followed by
// one "spare" value kept outside the tree: 2^k values for 2^k - 1 nodes. A
// merge compares the two halves element-wise; for a bitonic input the
// exchanged positions form a prefix or a suffix of each half, so the merge
// finds the boundary with one root-to-leaf walk and exchanges whole subtrees
// by swapping child pointers instead of moving values one by one.
//
// Allocation: one node per tree position, each allocated with its parent as
// the hint, built depth-first (parent before children); freed post-order.
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

namespace bisort_impl {

struct node {
    int value;
    node* left;
    node* right;
};

using olden::alloc_obj;
using olden::free_obj;

// The values: pseudo-random, pairwise distinct, in [0, 2^31) (they fit an
// int like the original's). The adaptive merge finds the exchange boundary by
// probing single pairs, which presumes distinct keys: with ties the exchange
// pattern need not be a prefix or suffix. So the values are a bijective
// scramble of a counter instead of independent draws.
class value_source {
public:
    explicit value_source(std::uint32_t seed) : seed_(seed & mask) {}
    int operator()() {
        std::uint32_t x = (counter_++ ^ seed_) & mask;   // each step is a bijection of [0, 2^31)
        x = (x * 0x2c1b3c6dU + 0x297a2d39U) & mask;
        x ^= x >> 12;
        x = (x * 0x297a2d39U) & mask;
        x ^= x >> 15;
        x = (x * 0x5bd1e995U) & mask;
        x ^= x >> 13;
        return static_cast<int>(x);
    }

private:
    static constexpr std::uint32_t mask = 0x7fffffffU;
    std::uint32_t seed_;
    std::uint32_t counter_ = 0;
};

// The original recursion: a node is created while n > 1, both children get
// n / 2, so the tree has 2^k - 1 nodes with k = floor(log2 n).
template <bench::policy P>
node* build(P& a, const void* hint, std::int64_t n, value_source& r) {
    if (n <= 1) return nullptr;
    node* h = alloc_obj<node>(a, hint);
    h->value = r();
    h->left = build(a, h, n / 2, r);
    h->right = build(a, h, n / 2, r);
    return h;
}

template <bench::policy P>
void release(P& a, node* t) {
    if (t == nullptr) return;
    release(a, t->left);
    release(a, t->right);
    free_obj(a, t);
}

// Is the pair (a, b) out of order for direction `down` (false: ascending)?
inline bool out_of_order(int a, int b, bool down) { return (a > b) != down; }

// Merges the bitonic sequence inorder(root) ++ [spare] into order `down`;
// returns the new spare (the last element of the sorted sequence).
inline int bimerge(node* root, int spare, bool down) {
    const bool right_exchange = out_of_order(root->value, spare, down);
    if (right_exchange) {
        const int v = root->value;
        root->value = spare;
        spare = v;
    }
    node* pl = root->left;
    node* pr = root->right;
    while (pl != nullptr) {
        const bool element_exchange = out_of_order(pl->value, pr->value, down);
        if (element_exchange) {
            const int v = pl->value;
            pl->value = pr->value;
            pr->value = v;
        }
        if (right_exchange) {
            // The exchanged positions are a suffix of each half.
            if (element_exchange) {
                node* t = pl->right;
                pl->right = pr->right;
                pr->right = t;
                pl = pl->left;
                pr = pr->left;
            } else {
                pl = pl->right;
                pr = pr->right;
            }
        } else {
            // The exchanged positions are a prefix of each half.
            if (element_exchange) {
                node* t = pl->left;
                pl->left = pr->left;
                pr->left = t;
                pl = pl->right;
                pr = pr->right;
            } else {
                pl = pl->left;
                pr = pr->left;
            }
        }
    }
    if (root->left != nullptr) {
        root->value = bimerge(root->left, root->value, down);
        spare = bimerge(root->right, spare, down);
    }
    return spare;
}

// Sorts inorder(root) ++ [spare] into order `down`; returns the new spare.
inline int bisort(node* root, int spare, bool down) {
    if (root->left == nullptr) {
        if (out_of_order(root->value, spare, down)) {
            const int v = root->value;
            root->value = spare;
            spare = v;
        }
        return spare;
    }
    root->value = bisort(root->left, root->value, down);
    spare = bisort(root->right, spare, !down);
    return bimerge(root, spare, down);
}

// In-order walk collecting: element count, an order-independent multiset
// hash, an order-dependent hash, and whether the sequence is ordered.
struct walk_state {
    std::uint64_t count = 0;
    std::uint64_t multiset = 0;
    std::uint64_t ordered_hash = 0;
    bool have_prev = false;
    int prev = 0;
    bool sorted = true;
    bool down = false;

    void visit(int v) {
        ++count;
        multiset += mix64(static_cast<std::uint64_t>(static_cast<std::uint32_t>(v)) ^ 0x5bd1e995ULL);
        ordered_hash = combine(ordered_hash, static_cast<std::uint32_t>(v));
        if (have_prev && (down ? prev < v : prev > v)) sorted = false;
        prev = v;
        have_prev = true;
    }
};

inline void inorder(const node* t, walk_state& s) {
    while (t != nullptr) {
        inorder(t->left, s);
        s.visit(t->value);
        t = t->right;
    }
}

inline walk_state scan(const node* root, int spare, bool down) {
    walk_state s;
    s.down = down;
    inorder(root, s);
    s.visit(spare);
    return s;
}

inline std::int64_t problem_size(scale s) {
    switch (s) {
    case scale::quick: return 300'000;        // 262,143 nodes
    case scale::standard: return 1'200'000;   // 1,048,575 nodes
    case scale::full: return 3'000'000;       // 2,097,151 nodes (paper)
    }
    return 0;
}

// The whole program; run_bisort below is its public entry point.
template <bench::policy P>
std::uint64_t run(P& alloc, scale s) {
    const std::int64_t n = problem_size(s);
    value_source r(0x62697374U);

    node* root = build(alloc, nullptr, n, r);
    int spare = r();
    std::string error;
    std::uint64_t result = 0;
    if (root == nullptr) {
        error = "bisort: empty tree";
    } else {
        const walk_state before = scan(root, spare, false);

        spare = bisort(root, spare, false);
        const walk_state up = scan(root, spare, false);
        spare = bisort(root, spare, true);
        const walk_state down = scan(root, spare, true);

        if (!up.sorted) error = "bisort: forward sort produced an unsorted sequence";
        else if (!down.sorted) error = "bisort: backward sort produced an unsorted sequence";
        else if (up.count != before.count || down.count != before.count)
            error = "bisort: element count changed";
        else if (up.multiset != before.multiset || down.multiset != before.multiset)
            error = "bisort: output is not a permutation of the input";
        result = combine(combine(combine(before.count, before.multiset), up.ordered_hash), down.ordered_hash);
    }
    release(alloc, root);
    if (!error.empty()) throw std::runtime_error(error);
    return result;
}

} // namespace bisort_impl

template <bench::policy P>
std::uint64_t run_bisort(P& alloc, scale s) {
    return bisort_impl::run(alloc, s);
}

} // namespace bench::olden
