// `hinted_set<Key, Compare, Heap, Hint = tree_hint::parent>`: an ordered set of
// unique keys whose nodes are allocated next to an existing node: the tree
// parent by default, or the in-order predecessor or successor (see
// hinted_tree.hpp for the mechanism, the Hint policies and the memory, copy and
// move rules).
#pragma once
#include <algorithm>
#include <functional>
#include <initializer_list>
#include <utility>

#include <allotheque/stl/hinted_tree.hpp>

namespace allotheque {

namespace detail {
struct identity_key {
    template <class K>
    const K& operator()(const K& k) const noexcept { return k; }
    // emplace's argument, when it is the key itself (hinted_tree::emplace_with).
    template <class K>
    static const K& from_args(const K& k) noexcept { return k; }
};
} // namespace detail

template <class Key, class Compare, heap_like Heap, tree_hint_policy Hint = tree_hint::parent>
class hinted_set : public detail::hinted_tree<Key, detail::identity_key, Compare, Heap, Hint> {
    using base = detail::hinted_tree<Key, detail::identity_key, Compare, Heap, Hint>;

public:
    using key_type = Key;
    using typename base::const_iterator;
    using typename base::iterator;
    using typename base::node_type;
    using typename base::insert_return_type;

    explicit hinted_set(Heap& h, const Compare& c = Compare()) : base(h, c) {}
    hinted_set(Heap& h, std::initializer_list<Key> init, const Compare& c = Compare()) : base(h, c) {
        this->insert(init);
    }

    friend bool operator==(const hinted_set& a, const hinted_set& b) {
        return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
    }
    friend void swap(hinted_set& a, hinted_set& b) noexcept { a.swap(b); }
};

} // namespace allotheque
