// The red-black tree behind hinted_set and hinted_map: a Boost.Intrusive
// rbtree whose nodes come from a heap, each allocated next to an existing node.
// insert_unique_check finds where a new key would go (and rejects duplicates)
// before anything is allocated; the position it returns names the parent, and
// with it the new node's in-order neighbours, so the node is requested with one
// of them as hint and then linked with insert_unique_commit.
//
// Which neighbour is the tree's `Hint` policy (namespace tree_hint):
//   tree_hint::parent       the tree parent (default; the paper's hint for trees:
//                           what a lookup reads just before the node).
//   tree_hint::predecessor  the in-order predecessor (what an ascending walk reads
//                           just before the node); the successor for the smallest key.
//   tree_hint::successor    the in-order successor; the predecessor for the largest key.
// A new node is always a leaf, so its parent is one of its two in-order
// neighbours: parent hints alternate between predecessor and successor as the
// node is a right or a left child. bench/order measures the three.
//
// reorganize() lays the elements out again, after the fact, in the manner of
// Chilimbi, Hill and Larus's cache-conscious reorganisation (ccmorph): the
// tree is cut into clusters, each a subtree's top levels (as many as a page
// of nodes holds), and the clusters are ordered one after the other (a
// cluster, then the clusters below it, left to right), each cluster's nodes
// in van Emde Boas order (its top levels, then each subtree below them,
// recursively). The k-th element of that order goes to the k-th lowest of the
// tree's own node addresses (or, for values whose move may throw, to the k-th
// of new nodes allocated each next to the one before). A lookup then reads
// about one page per cluster instead of one per level, every link points
// upward in memory, and an in-order walk stays within a page for most steps.
// It is for trees built in an order unrelated to how they are read (random
// inserts mixed with other allocations), which placement at insertion cannot
// undo (docs/locality.md). The tree's shape is kept; only which node holds
// which element changes (detail/tree_relayout.hpp).
//
// Memory, copy and move rules are those of hinted_list (see hinted_list.hpp):
// one heap per container held by pointer, copy construction uses the source's
// heap, copy assignment keeps this container's heap, moves steal the nodes when
// the heaps are the same, swap exchanges nodes and heaps.
//
// Node handles (extract, insert(node_type&&), merge) follow the std rules with
// one difference that the heaps force: std requires equal allocators, here a
// node may go to a container on another heap, which then moves its value into
// a node of its own heap (allocated with the usual hint) and frees the old one
// to the heap it came from. Between containers on one heap a node is relinked:
// nothing is allocated, pointers and references to the value stay valid.
#pragma once
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

#include <boost/intrusive/rbtree.hpp>

#include <allotheque/allocator.hpp>
#include <allotheque/detail/fail.hpp>
#include <allotheque/detail/tree_relayout.hpp>
#include <allotheque/hint_policy.hpp>
#include <allotheque/request.hpp>

namespace allotheque {

// Hint policies of hinted_set / hinted_map: given the new node's neighbours
// (an object with parent(), predecessor() and successor(), each the address of
// an existing node or nullptr), the address to allocate the node next to. The
// result is advice: any address (or nullptr) is valid, the heap decides.
namespace tree_hint {
struct parent {
    template <class N>
    static const void* hint(const N& n) noexcept { return n.parent(); }
};
struct predecessor {
    template <class N>
    static const void* hint(const N& n) noexcept {
        const void* p = n.predecessor();
        return p ? p : n.successor();
    }
};
struct successor {
    template <class N>
    static const void* hint(const N& n) noexcept {
        const void* s = n.successor();
        return s ? s : n.predecessor();
    }
};
} // namespace tree_hint

// The neighbours a policy is shown, as a concept check needs them.
struct tree_hint_probe {
    const void* parent() const noexcept { return nullptr; }
    const void* predecessor() const noexcept { return nullptr; }
    const void* successor() const noexcept { return nullptr; }
};

template <class P>
concept tree_hint_policy = requires(const tree_hint_probe& n) {
    { P::hint(n) } -> std::convertible_to<const void*>;
};

} // namespace allotheque

namespace allotheque::detail {

namespace bi = boost::intrusive;

// KeyOf: a stateless functor returning the key of a stored value.
template <class Value, class KeyOf, class Compare, heap_like Heap, tree_hint_policy Hint = tree_hint::parent>
class hinted_tree {
protected:
    using key_type = std::remove_cvref_t<decltype(KeyOf{}(std::declval<const Value&>()))>;
    struct node : bi::set_base_hook<bi::link_mode<bi::normal_link>, bi::optimize_size<true>> {
        Value value;
        template <class... A>
        explicit node(A&&... a) : value(std::forward<A>(a)...) {}
    };
    struct key_of_node {
        using type = key_type;
        const key_type& operator()(const node& n) const noexcept { return KeyOf{}(n.value); }
    };
    using tree_type = bi::rbtree<node, bi::key_of_value<key_of_node>, bi::compare<Compare>,
                                 bi::constant_time_size<true>>;
    using node_allocator = allocator<node, Heap, no_hint>;

    template <bool Const>
    class iter {
        friend class hinted_tree;
        using base = std::conditional_t<Const, typename tree_type::const_iterator, typename tree_type::iterator>;
        base it_;

    public:
        using iterator_category = std::bidirectional_iterator_tag;
        using value_type = Value;
        using difference_type = std::ptrdiff_t;
        using pointer = std::conditional_t<Const, const Value*, Value*>;
        using reference = std::conditional_t<Const, const Value&, Value&>;

        iter() = default;
        explicit iter(base it) noexcept : it_(it) {}
        operator iter<true>() const noexcept { return iter<true>(typename tree_type::const_iterator(it_)); }
        reference operator*() const noexcept { return it_->value; }
        pointer operator->() const noexcept { return std::addressof(it_->value); }
        iter& operator++() noexcept {
            ++it_;
            return *this;
        }
        iter operator++(int) noexcept {
            iter t = *this;
            ++it_;
            return t;
        }
        iter& operator--() noexcept {
            --it_;
            return *this;
        }
        iter operator--(int) noexcept {
            iter t = *this;
            --it_;
            return t;
        }
        friend bool operator==(const iter& a, const iter& b) noexcept { return a.it_ == b.it_; }
        // Where the element's node lives.
        const void* address() const noexcept { return std::addressof(*it_); }
    };

    // A set stores bare keys; a map's value is more than its key.
    static constexpr bool keys_only = std::is_same_v<key_type, Value>;

public:
    using value_type = Value;
    using size_type = std::size_t;
    using difference_type = std::ptrdiff_t;
    using key_compare = Compare;
    using heap_type = Heap;
    // The allocator the nodes come from, rebound to the value (it carries no
    // hint policy: every node's hint is chosen by Hint).
    using allocator_type = allocator<Value, Heap, no_hint>;
    using iterator = iter<false>;
    using const_iterator = iter<true>;
    using reverse_iterator = std::reverse_iterator<iterator>;
    using const_reverse_iterator = std::reverse_iterator<const_iterator>;
    static constexpr std::size_t node_size = sizeof(node);

    // An element taken out by extract(), node and all, as std's node handles:
    // it can be changed (a map's key included) and inserted again without a
    // new allocation. Dropping it destroys the value and frees the node to
    // the heap it came from.
    class node_type {
        friend class hinted_tree;
        node* node_ = nullptr;
        Heap* heap_ = nullptr;
        node_type(node* n, Heap* h) noexcept : node_(n), heap_(h) {}
        void reset() noexcept {
            if (node_) disposer{heap_}(std::exchange(node_, nullptr));
        }

    public:
        using value_type = Value;
        using key_type = typename hinted_tree::key_type;
        using allocator_type = typename hinted_tree::allocator_type;

        constexpr node_type() noexcept = default;
        node_type(node_type&& o) noexcept : node_(std::exchange(o.node_, nullptr)), heap_(o.heap_) {}
        node_type& operator=(node_type&& o) noexcept {
            if (this != &o) {
                reset();
                node_ = std::exchange(o.node_, nullptr);
                heap_ = o.heap_;
            }
            return *this;
        }
        ~node_type() { reset(); }

        [[nodiscard]] bool empty() const noexcept { return node_ == nullptr; }
        explicit operator bool() const noexcept { return node_ != nullptr; }
        // Preconditions (as std's): not empty.
        allocator_type get_allocator() const noexcept { return allocator_type(*heap_); }
        value_type& value() const noexcept
            requires keys_only
        {
            return node_->value;
        }
        // The key is const inside the pair; a node out of every tree is the one
        // place it may change, which is why std's node handles give it out
        // mutable the same way. Changing it while the node is linked is not
        // possible: only an extracted node hands it out.
        key_type& key() const noexcept
            requires(!keys_only)
        {
            return const_cast<key_type&>(KeyOf{}(node_->value));
        }
        auto& mapped() const noexcept
            requires(!keys_only)
        {
            return node_->value.second;
        }
        void swap(node_type& o) noexcept {
            std::swap(node_, o.node_);
            std::swap(heap_, o.heap_);
        }
        friend void swap(node_type& a, node_type& b) noexcept { a.swap(b); }
    };
    struct insert_return_type {
        iterator position;
        bool inserted;
        node_type node;
    };

    explicit hinted_tree(Heap& h, const Compare& c = Compare()) : heap_(&h), tree_(c) {}
    hinted_tree(const hinted_tree& o) : heap_(o.heap_), tree_(o.tree_.key_comp()) { copy_from(o); }
    hinted_tree(hinted_tree&& o) noexcept : heap_(o.heap_), tree_(std::move(o.tree_)) {}
    hinted_tree& operator=(const hinted_tree& o) {
        if (this != &o) {
            clear();
            copy_from(o);
        }
        return *this;
    }
    hinted_tree& operator=(hinted_tree&& o) {
        if (this == &o) return *this;
        clear();
        if (heap_ == o.heap_) {
            tree_.swap(o.tree_);
        } else {
            for (auto& v : o) emplace_hint(end(), std::move(const_cast<std::remove_const_t<Value>&>(v)));
            o.clear();
        }
        return *this;
    }
    ~hinted_tree() { clear(); }

    Heap& heap() const noexcept { return *heap_; }
    key_compare key_comp() const { return tree_.key_comp(); }
    allocator_type get_allocator() const noexcept { return allocator_type(*heap_); }
    size_type max_size() const noexcept { return node_allocator(*heap_).max_size(); }

    iterator begin() noexcept { return iterator(tree_.begin()); }
    iterator end() noexcept { return iterator(tree_.end()); }
    const_iterator begin() const noexcept { return const_iterator(tree_.cbegin()); }
    const_iterator end() const noexcept { return const_iterator(tree_.cend()); }
    const_iterator cbegin() const noexcept { return begin(); }
    const_iterator cend() const noexcept { return end(); }
    reverse_iterator rbegin() noexcept { return reverse_iterator(end()); }
    reverse_iterator rend() noexcept { return reverse_iterator(begin()); }
    const_reverse_iterator rbegin() const noexcept { return const_reverse_iterator(end()); }
    const_reverse_iterator rend() const noexcept { return const_reverse_iterator(begin()); }
    const_reverse_iterator crbegin() const noexcept { return rbegin(); }
    const_reverse_iterator crend() const noexcept { return rend(); }
    bool empty() const noexcept { return tree_.empty(); }
    size_type size() const noexcept { return tree_.size(); }

    iterator find(const key_type& k) { return iterator(tree_.find(k)); }
    const_iterator find(const key_type& k) const { return const_iterator(tree_.find(k)); }
    bool contains(const key_type& k) const { return tree_.find(k) != tree_.end(); }
    size_type count(const key_type& k) const { return contains(k) ? 1 : 0; }
    iterator lower_bound(const key_type& k) { return iterator(tree_.lower_bound(k)); }
    const_iterator lower_bound(const key_type& k) const { return const_iterator(tree_.lower_bound(k)); }
    iterator upper_bound(const key_type& k) { return iterator(tree_.upper_bound(k)); }
    const_iterator upper_bound(const key_type& k) const { return const_iterator(tree_.upper_bound(k)); }
    std::pair<iterator, iterator> equal_range(const key_type& k) {
        auto [lo, hi] = tree_.equal_range(k);
        return {iterator(lo), iterator(hi)};
    }
    std::pair<const_iterator, const_iterator> equal_range(const key_type& k) const {
        auto [lo, hi] = tree_.equal_range(k);
        return {const_iterator(lo), const_iterator(hi)};
    }

    // Every insertion finds the key's place before the node is allocated, so
    // the node is asked for next to the neighbour that Hint picks; `near`
    // (std's hint) only says where the search starts.
    template <class... A>
    std::pair<iterator, bool> emplace(A&&... a) {
        return emplace_with([this](const key_type& k) { return locate(k); }, std::forward<A>(a)...);
    }
    template <class... A>
    iterator emplace_hint(const_iterator near, A&&... a) {
        return emplace_with([this, near](const key_type& k) { return locate(near, k); }, std::forward<A>(a)...)
            .first;
    }
    std::pair<iterator, bool> insert(const Value& v) { return emplace(v); }
    std::pair<iterator, bool> insert(Value&& v) { return emplace(std::move(v)); }
    iterator insert(const_iterator near, const Value& v) { return emplace_hint(near, v); }
    iterator insert(const_iterator near, Value&& v) { return emplace_hint(near, std::move(v)); }
    // Each element searched from the end first: sorted input goes in in linear time.
    template <std::input_iterator It, std::sentinel_for<It> S>
    void insert(It first, S last) {
        for (; first != last; ++first) emplace_hint(end(), *first);
    }
    void insert(std::initializer_list<Value> init) { insert(init.begin(), init.end()); }

    iterator erase(const_iterator pos) noexcept {
        auto it = tree_.iterator_to(const_cast<node&>(*pos.it_));
        return iterator(tree_.erase_and_dispose(it, disposer{heap_}));
    }
    size_type erase(const key_type& k) noexcept {
        auto it = tree_.find(k);
        if (it == tree_.end()) return 0;
        tree_.erase_and_dispose(it, disposer{heap_});
        return 1;
    }
    iterator erase(const_iterator first, const_iterator last) noexcept {
        return iterator(tree_.erase_and_dispose(first.it_, last.it_, disposer{heap_}));
    }
    void clear() noexcept { tree_.clear_and_dispose(disposer{heap_}); }
    // std::erase_if's counterpart, found by argument-dependent lookup: a
    // library may not add overloads to std, so call it unqualified (after
    // `using std::erase_if;` if std containers are about too).
    template <class Pred>
    friend size_type erase_if(hinted_tree& c, Pred pred) {
        const size_type before = c.size();
        for (auto it = c.begin(); it != c.end();) {
            if (pred(*it)) it = c.erase(it);
            else ++it;
        }
        return before - c.size();
    }

    // Unlinks the element; its node and value are the handle's from then on.
    node_type extract(const_iterator pos) noexcept {
        node& n = const_cast<node&>(*pos.it_);
        tree_.erase(tree_.iterator_to(n));
        return node_type(&n, heap_);
    }
    node_type extract(const key_type& k) {
        auto it = tree_.find(k);
        return it == tree_.end() ? node_type() : extract(const_iterator(it));
    }
    // Links the handle's node unless its key is present, in which case the
    // handle comes back in `node` (std semantics); see the top of this file
    // for a node from another heap.
    insert_return_type insert(node_type&& nh) {
        if (nh.empty()) return {end(), false, node_type()};
        position p = locate(KeyOf{}(nh.node_->value));
        if (!p.fresh) return {iterator(p.existing), false, std::move(nh)};
        return {adopt(p, nh), true, node_type()};
    }
    // As above, searching from `near` first; a refused handle is left as it was.
    iterator insert(const_iterator near, node_type&& nh) {
        if (nh.empty()) return end();
        position p = locate(near, KeyOf{}(nh.node_->value));
        if (!p.fresh) return iterator(p.existing);
        return adopt(p, nh);
    }
    // Moves in every element of `source` whose key is not here; the others stay there.
    void merge(hinted_tree& source) {
        if (&source == this) return;
        for (auto it = source.begin(); it != source.end();) {
            auto next = std::next(it);
            position p = locate(KeyOf{}(*it));
            if (p.fresh) {
                node_type nh = source.extract(it);
                try {
                    adopt(p, nh);
                } catch (...) {   // this heap refused a node: the element stays in source
                    source.insert(std::move(nh));
                    throw;
                }
            }
            it = next;
        }
    }
    void merge(hinted_tree&& source) { merge(source); }

    void swap(hinted_tree& o) noexcept {
        std::swap(heap_, o.heap_);
        tree_.swap(o.tree_);
    }

    // Lays the elements out in the clustered layout (see the top of this
    // file) and invalidates every iterator, pointer and reference.
    //   - Values whose move constructor cannot throw stay in the tree's own
    //     nodes: the k-th element of the clustered order moves into the
    //     node at the k-th lowest address, and the links follow. Nothing is
    //     allocated from the heap; 16 bytes per element of scratch are mapped
    //     from the system while it runs. noexcept but for that scratch
    //     (std::bad_alloc, the tree unchanged).
    //   - Other values are copied into new nodes allocated in the clustered
    //     order, each hinted next to the one before, then the old nodes are
    //     freed: a second copy of the nodes while it runs. Strong guarantee:
    //     if the heap refuses a node or a copy throws, the tree is as it was.
    // A value that can neither be moved without throwing nor copied (a mutex)
    // has no reorganize().
    void reorganize()
        requires(std::is_nothrow_move_constructible_v<Value> || std::is_copy_constructible_v<Value>)
    {
        const std::size_t n = tree_.size();
        if (n < 2) return;
        typename relayout::moves_type moves(n);
        if constexpr (std::is_nothrow_move_constructible_v<Value>) relayout::permute(tree_, moves);
        else copy_into_new_nodes(moves);
    }

protected:
    static constexpr std::size_t node_alignment = alignof(node) <= 8 ? 0 : alignof(node);

    struct disposer {
        Heap* heap;
        void operator()(node* n) const noexcept {
            n->~node();
            node_allocator(*heap).deallocate(n, 1);
        }
    };

    using relayout = detail::tree_relayout<tree_type>;
    using relocation = typename relayout::relocation;

    // The clustered layout in new nodes, each hinted next to the one before.
    void copy_into_new_nodes(typename relayout::moves_type& moves) {
        const std::size_t n = moves.size();
        relayout::clustered_order(tree_, moves);
        node_allocator al(*heap_);
        std::size_t got = 0;
        try {
            for (const void* hint = nullptr; got < n; ++got) {
                node* fresh_node = al.allocate(1, hint);
                moves[got].to = reinterpret_cast<std::uintptr_t>(fresh_node);
                hint = fresh_node;
            }
        } catch (...) {
            while (got > 0) al.deallocate(relayout::target(moves[--got]), 1);
            throw;
        }
        relayout::sort_by_from(moves);
        tree_type fresh(tree_.key_comp());
        try {
            fresh.clone_from(tree_, relocator{&moves}, disposer{heap_});
        } catch (...) {
            // clone_from disposed of the nodes it had built; the others are raw.
            for (std::size_t i = 0; i < n; ++i)
                if (!relayout::arrived(moves[i])) al.deallocate(relayout::target(moves[i]), 1);
            throw;
        }
        tree_.clear_and_dispose(disposer{heap_});
        tree_.swap(fresh);
    }
    // clone_from's cloner: the new node prepared for `old`, copied from it.
    struct relocator {
        typename relayout::moves_type* moves;
        node* operator()(const node& old) const {
            relocation& e = relayout::entry_of(*moves, &old);
            ::new (static_cast<void*>(relayout::target(e))) node(old.value);
            relayout::mark_arrived(e);
            return relayout::target(e);
        }
    };

    // Where key k would be linked: the parent node found by the check (null for
    // an empty tree), or the existing element with key k.
    struct position {
        typename tree_type::iterator existing;
        bool fresh;
        typename tree_type::insert_commit_data data;
    };
    position locate(const key_type& k) {
        position p{};
        auto r = tree_.insert_unique_check(k, p.data);
        p.existing = r.first;
        p.fresh = r.second;
        return p;
    }
    // The same, searching from `near` first (constant time when k goes just
    // before it, as std's hinted insertions).
    position locate(const_iterator near, const key_type& k) {
        position p{};
        auto r = tree_.insert_unique_check(near.it_, k, p.data);
        p.existing = r.first;
        p.fresh = r.second;
        return p;
    }
    // The would-be node's neighbours, for the Hint policy. A new node is a
    // leaf: linked left, its parent is its successor and its predecessor is the
    // parent's; linked right, the reverse. Found on demand (the walk to the
    // other neighbour climbs the path the check has just descended).
    class neighbours {
        using algo = typename tree_type::node_algorithms;
        using node_ptr = typename tree_type::node_ptr;
        node_ptr parent_, header_;
        bool left_;
        const void* at(node_ptr x) const noexcept { return x == header_ ? nullptr : std::to_address(x); }

    public:
        neighbours(node_ptr parent, node_ptr header, bool left) noexcept : parent_(parent), header_(header), left_(left) {}
        const void* parent() const noexcept { return at(parent_); }
        const void* predecessor() const noexcept {
            if (parent_ == header_) return nullptr;
            return left_ ? at(algo::prev_node(parent_)) : at(parent_);
        }
        const void* successor() const noexcept {
            if (parent_ == header_) return nullptr;
            return left_ ? at(parent_) : at(algo::next_node(parent_));
        }
    };
    // The address Hint picks (a node's hook, inside the node).
    const void* hint_for(const position& p) noexcept {
        return Hint::hint(neighbours(p.data.node, tree_.end().pointed_node(), p.data.link_left));
    }

    // Allocates the node near the neighbour Hint picks, constructs it from a..., links it.
    template <class... A>
    iterator commit(position& p, A&&... a) {
        node_allocator al(*heap_);
        node* n = al.allocate(1, hint_for(p));
        try {
            ::new (static_cast<void*>(n)) node(std::forward<A>(a)...);
        } catch (...) {
            al.deallocate(n, 1);
            throw;
        }
        return iterator(tree_.insert_unique_commit(*n, p.data));
    }

    // Links nh's node at p (fresh). A node from another heap cannot join the
    // tree (it would be freed to the wrong heap): its value moves into a node
    // of this heap, hinted as any new node, and the old node goes back to its
    // own heap. A value that cannot move has no way across: a checked error
    // rather than a compile error, so that its node handles still work
    // between containers on one heap.
    iterator adopt(position& p, node_type& nh) {
        if (nh.heap_ == heap_) return iterator(tree_.insert_unique_commit(*std::exchange(nh.node_, nullptr), p.data));
        iterator it;
        if constexpr (keys_only) {
            if constexpr (std::is_move_constructible_v<Value>) it = commit(p, std::move(nh.value()));
            else cannot_move(nh);
        } else {
            using mapped = std::remove_reference_t<decltype(nh.mapped())>;
            if constexpr (std::is_constructible_v<Value, key_type&&, mapped&&>)
                it = commit(p, std::move(nh.key()), std::move(nh.mapped()));
            else cannot_move(nh);
        }
        nh.reset();
        return it;
    }
    [[noreturn]] static void cannot_move(const node_type& nh) noexcept {
        detail::fail("allotheque::hinted_tree", "a value that cannot move, inserted into a container on another heap",
                     "insert(node_type&&)", nh.node_);
    }

    // The insertion behind emplace and emplace_hint; `at` locates a key. When
    // KeyOf::from_args finds the key among a... the value is built only for a
    // new key, in its node; else it is built first, to read its key, and then
    // moved into the node (std's emplace may build it either way).
    template <class At, class... A>
    std::pair<iterator, bool> emplace_with(At at, A&&... a) {
        if constexpr (requires {
                          { KeyOf::from_args(std::declval<A&>()...) } -> std::same_as<const key_type&>;
                      }) {
            position p = at(KeyOf::from_args(a...));
            if (!p.fresh) return {iterator(p.existing), false};
            return {commit(p, std::forward<A>(a)...), true};
        } else {
            Value v(std::forward<A>(a)...);
            position p = at(KeyOf{}(v));
            if (!p.fresh) return {iterator(p.existing), false};
            return {commit(p, std::move(v)), true};
        }
    }

    // Searched from the end first: o's sorted elements go in in linear time.
    void copy_from(const hinted_tree& o) {
        for (const Value& v : o) emplace_hint(end(), v);
    }

    Heap* heap_;
    tree_type tree_;
};

} // namespace allotheque::detail
