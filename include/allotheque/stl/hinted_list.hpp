// `hinted_list<T, Heap>`: a doubly linked list whose nodes are allocated next
// to their neighbour. Standard containers never pass a hint; this one asks the
// heap for every new node with the address of its predecessor (its successor
// when inserted at the front), which is the paper's "a list element near its
// predecessor" hint. On Velox/Medius/Defero a node then lands in the
// predecessor's vicinity whenever a free chunk of node size is there.
//
// Memory: every node comes from one heap (held by pointer; the heap must
// outlive the list). clear() and the destructor return all nodes in one
// heap::deallocate_run call per 64 nodes when the heap offers it.
// Copy: copy construction uses the source's heap; copy assignment keeps this
// list's heap and copies the elements. Move construction steals the nodes;
// move assignment steals them when both lists use the same heap, else moves the
// elements one by one. swap exchanges elements and heaps. Not thread-safe (a heap is not).
//
// Relinking members (splice, merge, sort, reverse, and remove_if / unique,
// which only free) allocate nothing and keep every node where it is; the
// nodes of another list on the same heap are taken over as they are. As std
// requires equal allocators there, the one difference: the elements of a list
// on another heap are moved into new nodes of this list's heap (hinted as
// emplace hints) and their old nodes freed, so iterators to them are invalidated.
//
// reorganize() is for a list whose order has drifted from its allocation
// order (elements inserted at scattered positions, among other allocations):
// a hint puts a node near its neighbour of the moment, not near the elements
// that later end up beside it. It gives the k-th element the node at the k-th
// lowest address, so a walk runs upward through memory, page after page, as
// hinted_set's does after its reorganize() (docs/locality.md).
#pragma once
#include <algorithm>
#include <cstddef>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

#include <allotheque/allocator.hpp>
#include <allotheque/detail/node_permutation.hpp>
#include <allotheque/hint_policy.hpp>
#include <allotheque/request.hpp>

namespace allotheque {

template <class T, heap_like Heap>
class hinted_list {
    struct link {
        link* prev;
        link* next;
    };
    struct node : link {
        T value;
        template <class... A>
        explicit node(A&&... a) : link{nullptr, nullptr}, value(std::forward<A>(a)...) {}
    };
    // Explicit hints only: a null hint must stay null, so no policy may fill it.
    using node_allocator = allocator<node, Heap, no_hint>;

    template <bool Const>
    class iter {
        friend class hinted_list;
        using link_ptr = std::conditional_t<Const, const link*, link*>;
        link_ptr at_ = nullptr;
        explicit iter(link_ptr l) noexcept : at_(l) {}

    public:
        using iterator_category = std::bidirectional_iterator_tag;
        using value_type = T;
        using difference_type = std::ptrdiff_t;
        using pointer = std::conditional_t<Const, const T*, T*>;
        using reference = std::conditional_t<Const, const T&, T&>;

        iter() = default;
        operator iter<true>() const noexcept { return iter<true>(at_); }
        reference operator*() const noexcept {
            using node_ptr = std::conditional_t<Const, const node*, node*>;
            return static_cast<node_ptr>(at_)->value;
        }
        pointer operator->() const noexcept { return std::addressof(**this); }
        iter& operator++() noexcept {
            at_ = at_->next;
            return *this;
        }
        iter operator++(int) noexcept {
            iter t = *this;
            ++*this;
            return t;
        }
        iter& operator--() noexcept {
            at_ = at_->prev;
            return *this;
        }
        iter operator--(int) noexcept {
            iter t = *this;
            --*this;
            return t;
        }
        friend bool operator==(const iter& a, const iter& b) noexcept { return a.at_ == b.at_; }
        // Where the element's node lives: what a caller passes as a hint.
        const void* address() const noexcept { return at_; }
    };

public:
    using value_type = T;
    using size_type = std::size_t;
    using difference_type = std::ptrdiff_t;
    using reference = T&;
    using const_reference = const T&;
    using iterator = iter<false>;
    using const_iterator = iter<true>;
    using reverse_iterator = std::reverse_iterator<iterator>;
    using const_reverse_iterator = std::reverse_iterator<const_iterator>;
    using heap_type = Heap;
    // The allocator the nodes come from, rebound to the value.
    using allocator_type = allocator<T, Heap, no_hint>;
    // The request every node is allocated and freed with.
    static constexpr std::size_t node_size = sizeof(node);

    explicit hinted_list(Heap& h) noexcept : heap_(&h) { reset(); }
    hinted_list(Heap& h, std::initializer_list<T> init) : hinted_list(h) {
        for (const T& v : init) push_back(v);
    }
    hinted_list(const hinted_list& o) : hinted_list(*o.heap_) {
        for (const T& v : o) push_back(v);
    }
    hinted_list(hinted_list&& o) noexcept : hinted_list(*o.heap_) { steal(o); }
    hinted_list& operator=(const hinted_list& o) {
        if (this != &o) {
            clear();
            for (const T& v : o) push_back(v);
        }
        return *this;
    }
    hinted_list& operator=(hinted_list&& o) {
        if (this == &o) return *this;
        clear();
        if (heap_ == o.heap_) {
            steal(o);
        } else {
            for (T& v : o) push_back(std::move(v));
            o.clear();
        }
        return *this;
    }
    ~hinted_list() { clear(); }

    Heap& heap() const noexcept { return *heap_; }
    allocator_type get_allocator() const noexcept { return allocator_type(*heap_); }
    size_type max_size() const noexcept { return node_allocator(*heap_).max_size(); }
    iterator begin() noexcept { return iterator(head_.next); }
    iterator end() noexcept { return iterator(&head_); }
    const_iterator begin() const noexcept { return const_iterator(head_.next); }
    const_iterator end() const noexcept { return const_iterator(&head_); }
    const_iterator cbegin() const noexcept { return begin(); }
    const_iterator cend() const noexcept { return end(); }
    reverse_iterator rbegin() noexcept { return reverse_iterator(end()); }
    reverse_iterator rend() noexcept { return reverse_iterator(begin()); }
    const_reverse_iterator rbegin() const noexcept { return const_reverse_iterator(end()); }
    const_reverse_iterator rend() const noexcept { return const_reverse_iterator(begin()); }
    const_reverse_iterator crbegin() const noexcept { return rbegin(); }
    const_reverse_iterator crend() const noexcept { return rend(); }

    bool empty() const noexcept { return size_ == 0; }
    size_type size() const noexcept { return size_; }
    T& front() noexcept { return *begin(); }
    T& back() noexcept { return *std::prev(end()); }
    const T& front() const noexcept { return *begin(); }
    const T& back() const noexcept { return *std::prev(end()); }

    // Inserts before pos; the node is allocated near its predecessor (near its
    // successor when it becomes the first element, no hint in an empty list).
    template <class... A>
    iterator emplace(const_iterator pos, A&&... a) {
        link* next = const_cast<link*>(pos.at_);
        link* prev = next->prev;
        const void* hint = prev != &head_ ? static_cast<const void*>(prev)
                           : next != &head_ ? static_cast<const void*>(next) : nullptr;
        node_allocator al(*heap_);
        node* n = al.allocate(1, hint);
        try {
            ::new (static_cast<void*>(n)) node(std::forward<A>(a)...);
        } catch (...) {
            al.deallocate(n, 1);
            throw;
        }
        n->prev = prev;
        n->next = next;
        prev->next = n;
        next->prev = n;
        ++size_;
        return iterator(n);
    }
    iterator insert(const_iterator pos, const T& v) { return emplace(pos, v); }
    iterator insert(const_iterator pos, T&& v) { return emplace(pos, std::move(v)); }
    // These return the first element inserted (pos if none); all or nothing.
    iterator insert(const_iterator pos, size_type n, const T& v) {
        return insert_all(pos, [&] {
            for (size_type i = 0; i < n; ++i) emplace(pos, v);
        });
    }
    template <std::input_iterator It, std::sentinel_for<It> S>
    iterator insert(const_iterator pos, It first, S last) {
        return insert_all(pos, [&] {
            for (; first != last; ++first) emplace(pos, *first);
        });
    }
    iterator insert(const_iterator pos, std::initializer_list<T> init) { return insert(pos, init.begin(), init.end()); }
    template <class... A>
    T& emplace_back(A&&... a) { return *emplace(end(), std::forward<A>(a)...); }
    template <class... A>
    T& emplace_front(A&&... a) { return *emplace(begin(), std::forward<A>(a)...); }
    void push_back(const T& v) { emplace(end(), v); }
    void push_back(T&& v) { emplace(end(), std::move(v)); }
    void push_front(const T& v) { emplace(begin(), v); }
    void push_front(T&& v) { emplace(begin(), std::move(v)); }

    iterator erase(const_iterator pos) noexcept {
        link* l = const_cast<link*>(pos.at_);
        link* next = l->next;
        l->prev->next = next;
        next->prev = l->prev;
        --size_;
        destroy(static_cast<node*>(l));
        return iterator(next);
    }
    iterator erase(const_iterator first, const_iterator last) noexcept {
        while (first != last) first = erase(first);
        return iterator(const_cast<link*>(last.at_));
    }
    void pop_back() noexcept { erase(std::prev(end())); }
    void pop_front() noexcept { erase(begin()); }

    // Grows at the back (all or nothing) or shrinks from it.
    void resize(size_type n) { resize_with(n, [this] { emplace_back(); }); }
    void resize(size_type n, const T& v) { resize_with(n, [this, &v] { emplace_back(v); }); }

    // The existing elements are assigned to, so they keep their nodes; the
    // list then grows or shrinks at the back.
    template <std::input_iterator It, std::sentinel_for<It> S>
    void assign(It first, S last) {
        iterator it = begin();
        for (; it != end() && first != last; ++it, ++first) *it = *first;
        if (first == last) erase(it, end());
        else insert(end(), std::move(first), std::move(last));
    }
    void assign(size_type n, const T& v) {
        iterator it = begin();
        for (; it != end() && n > 0; ++it, --n) *it = v;
        if (n == 0) erase(it, end());
        else insert(end(), n, v);
    }
    void assign(std::initializer_list<T> init) { assign(init.begin(), init.end()); }
    hinted_list& operator=(std::initializer_list<T> init) {
        assign(init);
        return *this;
    }

    // Moves o's elements (one, or [first, last)) before pos; see the top of
    // this file for a list on another heap.
    void splice(const_iterator pos, hinted_list& o) { splice(pos, o, o.begin(), o.end()); }
    void splice(const_iterator pos, hinted_list&& o) { splice(pos, o); }
    void splice(const_iterator pos, hinted_list& o, const_iterator it) { splice(pos, o, it, std::next(it)); }
    void splice(const_iterator pos, hinted_list&& o, const_iterator it) { splice(pos, o, it); }
    void splice(const_iterator pos, hinted_list& o, const_iterator first, const_iterator last) {
        if (first == last) return;
        if (heap_ != o.heap_) {
            while (first != last) {
                emplace(pos, std::move(const_cast<T&>(*first)));
                first = o.erase(first);
            }
            return;
        }
        link* a = const_cast<link*>(first.at_);
        link* b = const_cast<link*>(last.at_)->prev;
        if (a == pos.at_ || b->next == pos.at_) return;   // already there
        if (&o != this) {
            const auto k = static_cast<size_type>(std::distance(first, last));
            o.size_ -= k;
            size_ += k;
        }
        unlink_run(a, b);
        link_run_before(const_cast<link*>(pos.at_), a, b);
    }
    void splice(const_iterator pos, hinted_list&& o, const_iterator first, const_iterator last) {
        splice(pos, o, first, last);
    }

    // Erase (in std::list's C++20 form, returning how many): the elements are
    // unlinked during the walk and destroyed after it, so `v` may be one of them.
    size_type remove(const T& v) {
        return remove_if([&v](const T& x) { return x == v; });
    }
    template <class Pred>
    size_type remove_if(Pred pred) {
        doomed d(*this);
        for (link* l = head_.next; l != &head_;) {
            link* next = l->next;
            if (pred(value_of(l))) d.take(l);
            l = next;
        }
        return d.count;
    }
    // Keeps the first of each run of consecutive equal elements; same(kept, x).
    size_type unique() { return unique(std::equal_to<>()); }
    template <class BinaryPred>
    size_type unique(BinaryPred same) {
        doomed d(*this);
        if (size_ < 2) return 0;
        for (link *kept = head_.next, *l = kept->next; l != &head_;) {
            link* next = l->next;
            if (same(value_of(kept), value_of(l))) d.take(l);
            else kept = l;
            l = next;
        }
        return d.count;
    }

    void reverse() noexcept {
        link* l = &head_;
        do {
            std::swap(l->prev, l->next);
            l = l->prev;   // the old next
        } while (l != &head_);
    }

    // Merges sorted o into this sorted list, stably (equal elements of this
    // list first); o ends empty. A throwing comparison leaves both lists
    // valid, each element in one of them.
    void merge(hinted_list& o) { merge(o, std::less<>()); }
    void merge(hinted_list&& o) { merge(o); }
    template <class Compare>
    void merge(hinted_list& o, Compare less) {
        if (&o == this) return;
        const_iterator at = begin();
        while (!o.empty()) {
            while (at != end() && !less(o.front(), *at)) ++at;
            if (at == end()) {
                splice(at, o);
                return;
            }
            // The run of o that goes before *at moves in one splice.
            const_iterator last = std::next(o.cbegin());
            while (last != o.cend() && less(*last, *at)) ++last;
            splice(at, o, o.cbegin(), last);
        }
    }
    template <class Compare>
    void merge(hinted_list&& o, Compare less) {
        merge(o, less);
    }

    // Stable merge sort on the links: no allocation, no element moved. If the
    // comparison throws, every element is still in the list, in some order.
    void sort() { sort(std::less<>()); }
    template <class Compare>
    void sort(Compare less) {
        if (size_ < 2) return;
        // The nodes as a chain through `next`, ended by nullptr. runs[i] holds
        // 2^i sorted nodes or nothing, and every run holds nodes from before
        // those of the runs below it and of `carry`.
        head_.prev->next = nullptr;
        link* rest = head_.next;
        link* carry = nullptr;
        link* runs[64] = {};
        try {
            while (rest) {
                carry = rest;
                rest = rest->next;
                carry->next = nullptr;
                std::size_t i = 0;
                for (; runs[i]; ++i) {
                    merge_chains(runs[i], carry, less);
                    carry = std::exchange(runs[i], nullptr);
                }
                runs[i] = std::exchange(carry, nullptr);
            }
            for (link*& run : runs) {
                if (!run) continue;
                merge_chains(run, carry, less);
                carry = std::exchange(run, nullptr);
            }
        } catch (...) {
            for (link* run : runs) carry = concat(carry, run);
            relink_chain(concat(carry, rest));
            throw;
        }
        relink_chain(carry);
    }

    // Destroys every element and gives the nodes back as runs (heap::deallocate_run).
    void clear() noexcept {
        void* batch[64];
        std::size_t k = 0;
        for (link* l = head_.next; l != &head_;) {
            node* n = static_cast<node*>(l);
            l = l->next;
            n->~node();
            batch[k++] = n;
            if (k == std::size(batch)) {
                release(batch, k);
                k = 0;
            }
        }
        if (k > 0) release(batch, k);
        reset();
    }

    // Walks in list order then run upward through memory (see the top of
    // this file). Invalidates every iterator, pointer and reference.
    //   - Values whose move constructor cannot throw stay in the list's own
    //     nodes: the k-th element moves into the node at the k-th lowest
    //     address and the links follow. Nothing is allocated from the heap;
    //     16 bytes per element of scratch are mapped from the system while it
    //     runs. noexcept but for that scratch (std::bad_alloc, the list
    //     unchanged).
    //   - Other values are copied into new nodes, each hinted next to the one
    //     before, then the old nodes are freed: a second copy of the nodes
    //     while it runs. Strong guarantee: if the heap refuses a node or a
    //     copy throws, the list is as it was.
    // A value that can neither be moved without throwing nor copied has no
    // reorganize().
    void reorganize()
        requires(std::is_nothrow_move_constructible_v<T> || std::is_copy_constructible_v<T>)
    {
        if (size_ < 2) return;
        if constexpr (std::is_nothrow_move_constructible_v<T>) {
            using permutation = detail::node_permutation<node>;
            typename permutation::moves_type moves(size_);
            std::size_t k = 0;
            for (link* l = head_.next; l != &head_; l = l->next) moves[k++].from = static_cast<node*>(l);
            permutation::to_rank_addresses(moves);
            struct in_flight {
                alignas(T) std::byte raw[sizeof(T)];
                T& value() noexcept { return *std::launder(reinterpret_cast<T*>(raw)); }
            } held[2];
            permutation::follow_cycles(
                moves,
                [&](unsigned a, node* from) noexcept {
                    ::new (static_cast<void*>(held[a].raw)) T(std::move(from->value));
                    from->value.~T();
                },
                [&](unsigned a, node* to) noexcept {
                    ::new (static_cast<void*>(std::addressof(to->value))) T(std::move(held[a].value()));
                    held[a].value().~T();
                });
            // Sorted by node, moves now list the nodes in their new order.
            link* prev = &head_;
            for (std::size_t i = 0; i < moves.size(); ++i) {
                link* n = moves[i].from;
                prev->next = n;
                n->prev = prev;
                prev = n;
            }
            prev->next = &head_;
            head_.prev = prev;
        } else {
            hinted_list fresh(*this);   // each node allocated next to the one before
            swap(fresh);
        }
    }

    // Exchanges elements and heaps.
    void swap(hinted_list& o) noexcept {
        hinted_list t(std::move(o));
        o.heap_ = heap_;
        o.steal(*this);
        heap_ = t.heap_;
        steal(t);
    }
    friend void swap(hinted_list& a, hinted_list& b) noexcept { a.swap(b); }

    friend bool operator==(const hinted_list& a, const hinted_list& b) {
        return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
    }
    // std::erase / std::erase_if's counterparts, found by argument-dependent
    // lookup: a library may not add overloads to std, so call them
    // unqualified (after `using std::erase_if;` if std containers are about too).
    friend size_type erase(hinted_list& l, const T& v) { return l.remove(v); }
    template <class Pred>
    friend size_type erase_if(hinted_list& l, Pred pred) {
        return l.remove_if(std::move(pred));
    }

private:
    static constexpr std::size_t node_alignment = alignof(node) <= 8 ? 0 : alignof(node);

    void reset() noexcept {
        head_.prev = head_.next = &head_;
        size_ = 0;
    }
    // Takes o's nodes (same heap); o becomes empty.
    void steal(hinted_list& o) noexcept {
        if (o.empty()) return;
        head_.next = o.head_.next;
        head_.prev = o.head_.prev;
        head_.next->prev = &head_;
        head_.prev->next = &head_;
        size_ = o.size_;
        o.reset();
    }
    static T& value_of(link* l) noexcept { return static_cast<node*>(l)->value; }

    // Nodes unlinked by remove_if or unique, destroyed when it goes (after
    // the walk, or as a predicate throws).
    struct doomed {
        hinted_list& list;
        link* chain = nullptr;
        size_type count = 0;
        explicit doomed(hinted_list& l) noexcept : list(l) {}
        doomed(const doomed&) = delete;
        doomed& operator=(const doomed&) = delete;
        void take(link* l) noexcept {
            l->prev->next = l->next;
            l->next->prev = l->prev;
            --list.size_;
            l->next = chain;
            chain = l;
            ++count;
        }
        ~doomed() {
            while (chain) list.destroy(static_cast<node*>(std::exchange(chain, chain->next)));
        }
    };

    // [a, b], linked in a list, taken out of it / put before `pos`.
    static void unlink_run(link* a, link* b) noexcept {
        a->prev->next = b->next;
        b->next->prev = a->prev;
    }
    static void link_run_before(link* pos, link* a, link* b) noexcept {
        a->prev = pos->prev;
        b->next = pos;
        pos->prev->next = a;
        pos->prev = b;
    }

    // Runs fill, which inserts before pos (with emplace, so each node is
    // hinted near the one inserted before it); if it throws, what it inserted
    // goes. The node before pos stays where it is meanwhile, so it tells
    // where the insertion begins.
    template <class Fill>
    iterator insert_all(const_iterator pos, Fill fill) {
        link* before = const_cast<link*>(pos.at_)->prev;
        try {
            fill();
        } catch (...) {
            erase(const_iterator(before->next), pos);
            throw;
        }
        return iterator(before->next);
    }
    template <class Fn>
    void resize_with(size_type n, Fn append_one) {
        while (size_ > n) pop_back();
        insert_all(end(), [&] {
            while (size_ < n) append_one();
        });
    }

    // Chains (sort's): singly linked through `next`, ended by nullptr.
    static link* concat(link* a, link* b) noexcept {
        if (!a) return b;
        link* t = a;
        while (t->next) t = t->next;
        t->next = b;
        return a;
    }
    // Merges sorted chain b into sorted chain a, a's nodes first among equals.
    // Whatever happens, a ends up with every node and b empty.
    template <class Compare>
    static void merge_chains(link*& a, link*& b, Compare& less) {
        link out{nullptr, nullptr};
        link* tail = &out;
        try {
            while (a && b) {
                link*& from = less(value_of(b), value_of(a)) ? b : a;
                tail->next = from;
                tail = from;
                from = from->next;
            }
        } catch (...) {
            tail->next = nullptr;
            a = concat(concat(out.next, a), b);
            b = nullptr;
            throw;
        }
        tail->next = a ? a : b;
        a = out.next;
        b = nullptr;
    }
    // Makes the chain the list's order again (the same nodes, so size_ holds).
    void relink_chain(link* first) noexcept {
        link* prev = &head_;
        for (link* l = first; l; l = l->next) {
            prev->next = l;
            l->prev = prev;
            prev = l;
        }
        prev->next = &head_;
        head_.prev = prev;
    }

    void destroy(node* n) noexcept {
        n->~node();
        node_allocator(*heap_).deallocate(n, 1);
    }
    void release(void* const* ps, std::size_t k) noexcept {
        if constexpr (requires(Heap& h) { h.deallocate_run(ps, k, request{}); }) {
            heap_->deallocate_run(ps, k, request{sizeof(node), nullptr, node_alignment});
        } else {
            node_allocator al(*heap_);
            for (std::size_t i = 0; i < k; ++i) al.deallocate(static_cast<node*>(ps[i]), 1);
        }
    }

    Heap* heap_;
    link head_;
    size_type size_ = 0;
};

} // namespace allotheque
