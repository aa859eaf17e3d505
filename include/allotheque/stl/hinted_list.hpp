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
// reorganize() is for a list whose order has drifted from its allocation
// order (elements inserted at scattered positions, among other allocations):
// a hint puts a node near its neighbour of the moment, not near the elements
// that later end up beside it. It gives the k-th element the node at the k-th
// lowest address, so a walk runs upward through memory, page after page, as
// hinted_set's does after its reorganize() (docs/locality.md).
#pragma once
#include <algorithm>
#include <cstddef>
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
