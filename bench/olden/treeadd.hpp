// treeadd (Olden): build a complete binary tree and add up its values with a
// recursive walk.
//
// The tree is built depth first, parent before children, and every child is
// allocated with its parent as the locality hint. Node i of the heap
// numbering (root 1, children 2i and 2i+1) holds the value i, so the sum over
// a tree of n = 2^depth - 1 nodes must equal n (n + 1) / 2.
#pragma once
#include <cstdint>
#include <new>
#include <stdexcept>

#include "common/policy.hpp"
#include "olden/rng.hpp"
#include "olden/scale.hpp"

namespace bench::olden {

namespace treeadd_detail {

struct node {
    std::uint32_t value;
    node* left;
    node* right;
};

template <bench::policy P>
node* build(P& alloc, std::uint32_t index, int levels, const void* hint) {
    auto* n = new (alloc.allocate(sizeof(node), hint)) node{index, nullptr, nullptr};
    if (levels > 1) {
        n->left = build(alloc, 2 * index, levels - 1, n);
        n->right = build(alloc, 2 * index + 1, levels - 1, n);
    }
    return n;
}

inline std::uint64_t sum(const node* n) {
    if (n == nullptr) return 0;
    return n->value + sum(n->left) + sum(n->right);
}

template <bench::policy P>
void destroy(P& alloc, node* n) {
    if (n == nullptr) return;
    destroy(alloc, n->left);
    destroy(alloc, n->right);
    n->~node();
    alloc.deallocate(n, sizeof(node));
}

// Olden's input: depth 22 (4,194,303 nodes).
inline int depth_for(scale s) {
    switch (s) {
    case scale::quick: return 21;
    case scale::standard: return 23;
    case scale::full: return 22;
    }
    return 21;
}

} // namespace treeadd_detail

template <bench::policy P>
std::uint64_t run_treeadd(P& alloc, scale s) {
    using namespace treeadd_detail;
    const int depth = depth_for(s);
    node* root = build(alloc, 1, depth, nullptr);
    const std::uint64_t total = sum(root);
    destroy(alloc, root);

    const std::uint64_t n = (std::uint64_t{1} << depth) - 1;
    if (total != n * (n + 1) / 2) throw std::runtime_error("treeadd: sum differs from n(n+1)/2");
    return combine(combine(0x7472656561646400ULL, n), total);
}

} // namespace bench::olden
