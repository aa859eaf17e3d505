// `hinted_map<Key, T, Compare, Heap, Hint = tree_hint::parent>`: an ordered map
// with unique keys whose nodes are allocated next to an existing node: the tree
// parent by default, or the in-order predecessor or successor (see
// hinted_tree.hpp for the mechanism, the Hint policies and the memory, copy and
// move rules). The key is checked before anything is allocated or constructed,
// so try_emplace and operator[] build the mapped value only for a new key.
#pragma once
#include <algorithm>
#include <functional>
#include <initializer_list>
#include <stdexcept>
#include <tuple>
#include <utility>

#include <allotheque/stl/hinted_tree.hpp>

namespace allotheque {

namespace detail {
struct pair_first_key {
    template <class P>
    const auto& operator()(const P& p) const noexcept { return p.first; }
};
} // namespace detail

template <class Key, class T, class Compare, heap_like Heap, tree_hint_policy Hint = tree_hint::parent>
class hinted_map : public detail::hinted_tree<std::pair<const Key, T>, detail::pair_first_key, Compare, Heap, Hint> {
    using base = detail::hinted_tree<std::pair<const Key, T>, detail::pair_first_key, Compare, Heap, Hint>;

public:
    using key_type = Key;
    using mapped_type = T;
    using value_type = std::pair<const Key, T>;
    using typename base::const_iterator;
    using typename base::iterator;

    explicit hinted_map(Heap& h, const Compare& c = Compare()) : base(h, c) {}
    hinted_map(Heap& h, std::initializer_list<value_type> init, const Compare& c = Compare()) : base(h, c) {
        for (const value_type& v : init) insert(v);
    }

    std::pair<iterator, bool> insert(const value_type& v) { return this->emplace_unique_value(v); }
    std::pair<iterator, bool> insert(value_type&& v) { return this->emplace_unique_value(std::move(v)); }

    template <class... A>
    std::pair<iterator, bool> try_emplace(const Key& k, A&&... a) {
        auto p = this->locate(k);
        if (!p.fresh) return {iterator(p.existing), false};
        return {this->commit(p, std::piecewise_construct, std::forward_as_tuple(k),
                             std::forward_as_tuple(std::forward<A>(a)...)),
                true};
    }
    template <class... A>
    std::pair<iterator, bool> try_emplace(Key&& k, A&&... a) {
        auto p = this->locate(k);
        if (!p.fresh) return {iterator(p.existing), false};
        return {this->commit(p, std::piecewise_construct, std::forward_as_tuple(std::move(k)),
                             std::forward_as_tuple(std::forward<A>(a)...)),
                true};
    }
    template <class M>
    std::pair<iterator, bool> insert_or_assign(const Key& k, M&& m) {
        auto r = try_emplace(k, std::forward<M>(m));
        if (!r.second) r.first->second = std::forward<M>(m);
        return r;
    }

    T& operator[](const Key& k) { return try_emplace(k).first->second; }
    T& operator[](Key&& k) { return try_emplace(std::move(k)).first->second; }
    T& at(const Key& k) {
        auto it = this->find(k);
        if (it == this->end()) throw std::out_of_range("allotheque::hinted_map::at");
        return it->second;
    }
    const T& at(const Key& k) const {
        auto it = this->find(k);
        if (it == this->end()) throw std::out_of_range("allotheque::hinted_map::at");
        return it->second;
    }

    friend bool operator==(const hinted_map& a, const hinted_map& b) {
        return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
    }
    friend void swap(hinted_map& a, hinted_map& b) noexcept { a.swap(b); }
};

} // namespace allotheque
