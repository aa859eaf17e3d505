// `hinted_map<Key, T, Compare, Heap, Hint = tree_hint::parent>`: an ordered map
// with unique keys whose nodes are allocated next to an existing node: the tree
// parent by default, or the in-order predecessor or successor (see
// hinted_tree.hpp for the mechanism, the Hint policies and the memory, copy and
// move rules). The key is checked before anything is allocated or constructed,
// so try_emplace, insert_or_assign and operator[] build the mapped value only
// for a new key, and so does emplace when its arguments hold the key as it is
// (a key, a pair, or piecewise with the key alone in the first tuple).
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
    // Where emplace's arguments hold the key (hinted_tree::emplace_with uses
    // these only when the type found is the key type): (key, mapped), a pair,
    // or (piecewise_construct, (key), (mapped...)).
    template <class K, class M>
    static const K& from_args(const K& k, const M&) noexcept { return k; }
    template <class K, class M>
    static const K& from_args(const std::pair<K, M>& p) noexcept { return p.first; }
    template <class K, class M>
    static const auto& from_args(std::piecewise_construct_t, const std::tuple<K>& k, const M&) noexcept {
        return std::get<0>(k);
    }
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
    using typename base::node_type;
    using typename base::insert_return_type;

    explicit hinted_map(Heap& h, const Compare& c = Compare()) : base(h, c) {}
    hinted_map(Heap& h, std::initializer_list<value_type> init, const Compare& c = Compare()) : base(h, c) {
        this->insert(init);
    }

    // The mapped value is built from a... only for a new key.
    template <class... A>
    std::pair<iterator, bool> try_emplace(const Key& k, A&&... a) {
        return build_at(this->locate(k), k, std::forward<A>(a)...);
    }
    template <class... A>
    std::pair<iterator, bool> try_emplace(Key&& k, A&&... a) {
        return build_at(this->locate(k), std::move(k), std::forward<A>(a)...);
    }
    template <class... A>
    iterator try_emplace(const_iterator near, const Key& k, A&&... a) {
        return build_at(this->locate(near, k), k, std::forward<A>(a)...).first;
    }
    template <class... A>
    iterator try_emplace(const_iterator near, Key&& k, A&&... a) {
        return build_at(this->locate(near, k), std::move(k), std::forward<A>(a)...).first;
    }
    template <class M>
    std::pair<iterator, bool> insert_or_assign(const Key& k, M&& m) {
        return assign_at(this->locate(k), k, std::forward<M>(m));
    }
    template <class M>
    std::pair<iterator, bool> insert_or_assign(Key&& k, M&& m) {
        return assign_at(this->locate(k), std::move(k), std::forward<M>(m));
    }
    template <class M>
    iterator insert_or_assign(const_iterator near, const Key& k, M&& m) {
        return assign_at(this->locate(near, k), k, std::forward<M>(m)).first;
    }
    template <class M>
    iterator insert_or_assign(const_iterator near, Key&& k, M&& m) {
        return assign_at(this->locate(near, k), std::move(k), std::forward<M>(m)).first;
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

private:
    using position = typename base::position;
    // The element for key k at p (as located), new unless the key is there.
    template <class K, class... A>
    std::pair<iterator, bool> build_at(position p, K&& k, A&&... a) {
        if (!p.fresh) return {iterator(p.existing), false};
        return {this->commit(p, std::piecewise_construct, std::forward_as_tuple(std::forward<K>(k)),
                             std::forward_as_tuple(std::forward<A>(a)...)),
                true};
    }
    template <class K, class M>
    std::pair<iterator, bool> assign_at(position p, K&& k, M&& m) {
        if (p.fresh) return build_at(p, std::forward<K>(k), std::forward<M>(m));
        iterator it(p.existing);
        it->second = std::forward<M>(m);
        return {it, false};
    }
};

} // namespace allotheque
