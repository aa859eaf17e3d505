// `list<Attr, Nested, Pred, Links>`: classes of `Attr` kept in a linked list.
// `list<void>`: the terminal E-container, a list of the free chunks themselves.
// `list<Attr, void, Pred>`: the element list (containers/element_list.hpp,
// included here).
//
// A class node (link, the value when the attribute is explicit, the nested
// header) lives in its host chunk. The host is not in the nested partition: it
// is handed out last, when the nested partition has run dry, and the class
// disappears with it.
#pragma once
#include <algorithm>
#include <cstddef>
#include <new>
#include <type_traits>

#include <allotheque/attributes/attribute.hpp>
#include <allotheque/containers/class_node.hpp>
#include <allotheque/containers/element_list.hpp>
#include <allotheque/containers/links.hpp>
#include <allotheque/containers/list_fwd.hpp>
#include <allotheque/containers/partition.hpp>
#include <allotheque/containers/search.hpp>
#include <allotheque/predicates/predicate.hpp>

namespace allotheque {

// ---- terminal: the chunks -------------------------------------------------
// It only pushes and pops, so it is a plain stack threaded through the free
// chunks whatever the Links: one pointer per chunk, and one test per pop (a
// generic intrusive list tests emptiness twice, which the hot path feels).
template <class Pred, class Links>
struct list<void, void, Pred, Links> {
    struct chunk {
        chunk* next;
    };
    struct header_type {
        chunk* head = nullptr;
        bool empty() const noexcept { return head == nullptr; }
    };

    static constexpr std::size_t min_chunk = sizeof(chunk);
    static constexpr bool size_exact = false;
    static constexpr bool address_safe = true;
    static constexpr bool reads_size = false;
    static constexpr bool reads_address = false;
    static constexpr bool stored_in_chunks = true;
    static constexpr bool returns_last_free = true;
    static constexpr bool terminal = true;   // allocate never hands out a class's host
    static bool prepare(header_type&, std::byte*, std::size_t) noexcept { return true; }
    static void destroy(header_type&) noexcept {}

    static void init(header_type& h) noexcept { ::new (static_cast<void*>(&h)) header_type(); }
    static bool empty(const header_type& h) noexcept { return h.head == nullptr; }
    template <request_like R>
    static bool accepts(const std::byte*, std::size_t, const R&) noexcept { return true; }
    static constexpr std::size_t round_size(std::size_t n) noexcept { return n; }

    template <request_like R>
    static std::byte* allocate(header_type& h, const R&) noexcept {
        chunk* c = h.head;
        if (!c) return nullptr;
        h.head = c->next;
        return reinterpret_cast<std::byte*>(c);
    }
    static void deallocate(header_type& h, std::byte* p, std::size_t) noexcept {
        h.head = ::new (static_cast<void*>(p)) chunk{h.head};
    }
    // Links a run of chunks (the range deallocation the paper offers STL
    // containers): the first of the run ends on top.
    static void deallocate_run(header_type& h, std::byte* const* ps, std::size_t count, std::size_t n) noexcept {
        for (std::size_t i = count; i-- > 0;) deallocate(h, ps[i], n);
    }
    // Consecutive chunks linked in place, p on top.
    static void deallocate_range(header_type& h, std::byte* p, std::size_t count, std::size_t n) noexcept {
        chunk* top = h.head;
        for (std::byte* c = p + count * n; c != p;) top = ::new (static_cast<void*>(c -= n)) chunk{top};
        h.head = top;
    }
    // Hands every chunk to f (which may overwrite it) and leaves the list empty.
    template <class F>
    static void drain(header_type& h, F&& f) noexcept {
        while (chunk* c = h.head) {
            h.head = c->next;
            f(reinterpret_cast<std::byte*>(c));
        }
    }
    // Forgets every chunk (their memory is being given back as a whole).
    static void clear(header_type& h) noexcept { h.head = nullptr; }
};

// ---- class container: classes of Attr in a list ---------------------------
template <attribute Attr, partition Nested, allocation_predicate Pred, class Links>
struct list<Attr, Nested, Pred, Links> {
    static_assert(Nested::stored_in_chunks,
                  "allotheque::list: the nested partition keeps system resources in its header (a mapped "
                  "hash table); it can only be the outermost level");
    using value_type = typename Attr::value_type;
    struct node : Links::hook, class_node_base<node, Attr, Nested> {};
    struct header_type {
        typename Links::template container<node> classes;
        [[no_unique_address]] detail::slot<predicate_remembers<Pred>, node*> last{};
    };

    static constexpr std::size_t min_chunk = std::max(sizeof(node), Nested::min_chunk);
    static constexpr bool size_exact = (size_attribute<Attr> && is_exact_match<Pred>) || Nested::size_exact;
    static constexpr bool address_safe = (!address_attribute<Attr> || can_leave_target<Pred>) && Nested::address_safe;
    static constexpr bool reads_size = size_attribute<Attr> || Nested::reads_size;
    static constexpr bool reads_address = address_attribute<Attr> || Nested::reads_address;
    static constexpr bool stored_in_chunks = true;
    // One class per size, found by equality: a free lands in its size's class
    // (on top of its stack, or as the host of a new class, taken when the
    // stack is empty), which is where the next request of that size goes.
    static constexpr bool returns_last_free =
        size_attribute<Attr> && is_exact_match<Pred> && partition_returns_last_free<Nested>;
    static bool prepare(header_type&, std::byte*, std::size_t) noexcept { return true; }
    static void destroy(header_type&) noexcept {}

    static void init(header_type& h) noexcept { ::new (static_cast<void*>(&h)) header_type(); }
    static bool empty(const header_type& h) noexcept { return h.classes.empty(); }
    static constexpr std::size_t round_size(std::size_t n) noexcept { return Nested::round_size(n); }

    template <request_like R>
    static bool accepts(const std::byte* p, std::size_t n, const R& r) noexcept {
        return value_accepts<Pred>(Attr::of_chunk(p, n), Attr::of_request(r)) && Nested::accepts(p, n, r);
    }

    struct cursor {
        using handle = node*;
        using value_type = typename Attr::value_type;
        header_type& h;
        handle none() const noexcept { return nullptr; }
        handle first() noexcept { return h.classes.empty() ? nullptr : &h.classes.front(); }
        handle next(handle n) noexcept {
            auto it = std::next(h.classes.iterator_to(*n));
            return it == h.classes.end() ? nullptr : &*it;
        }
        handle lookup(value_type v) noexcept {
            for (node& n : h.classes)
                if (n.value() == v) return &n;
            return nullptr;
        }
        value_type value(handle n) const noexcept { return n->value(); }
        handle last() const noexcept {
            if constexpr (predicate_remembers<Pred>) return h.last;
            else return nullptr;
        }
    };

    // A class's chunks, for a container above that serves a run of one size
    // straight from them (hash_table's front): allocate and deallocate say
    // where the class they used keeps its chunks (`aimed`; nullptr when the
    // allocation handed out the class's host, so the class is gone). Only
    // over the terminal list, whose allocate returns nullptr when empty
    // instead of handing out a host, and only when this level remembers
    // nothing a direct push or pop would skip. The pointer lives as long as
    // the class: until an allocate through this level hands the host out.
    using front_header = typename Nested::header_type;
    static constexpr bool has_front =
        size_attribute<Attr> && is_exact_match<Pred> && !predicate_remembers<Pred> && requires { requires Nested::terminal; };
    template <request_like R>
    [[gnu::always_inline]] static std::byte* front_pop(front_header& f, const R& r) noexcept
        requires has_front
    {
        return Nested::allocate(f, r);
    }
    [[gnu::always_inline]] static void front_push(front_header& f, std::byte* p, std::size_t n) noexcept
        requires has_front
    {
        Nested::deallocate(f, p, n);
    }

    template <request_like R>
    static std::byte* allocate(header_type& h, const R& r, front_header** aimed = nullptr) noexcept {
        cursor c{h};
        return search<Pred>(c, Attr::of_request(r), [&](node* n) noexcept -> std::byte* {
            if (std::byte* p = Nested::allocate(n->nested, r)) {
                if constexpr (predicate_remembers<Pred>) h.last = n;
                if (aimed) *aimed = &n->nested;
                return p;
            }
            if (!Nested::empty(n->nested) || !Nested::accepts(n->host(), n->host_size(), r)) return nullptr;
            // The class used last is this one, and it disappears with its host:
            // nothing is remembered (as in hash_table, whose emptied class
            // no longer counts as the last one).
            if constexpr (predicate_remembers<Pred>) h.last = nullptr;
            if (aimed) *aimed = nullptr;
            Links::unlink(h.classes, *n);
            return n->host();
        });
    }

    [[gnu::always_inline]] static void deallocate(header_type& h, std::byte* p, std::size_t n,
                                                  front_header** aimed = nullptr) noexcept {
        const value_type v = Attr::of_chunk(p, n);
        cursor c{h};
        node* cls = c.lookup(v);
        if (cls) [[likely]] {
            Nested::deallocate(cls->nested, p, n);
            if constexpr (predicate_remembers_frees<Pred>) h.last = cls;
        } else {
            cls = open(h, p, n);
        }
        if (aimed) *aimed = &cls->nested;
    }

    // The chunk becomes the host of its own new class (out of line: the free
    // into an existing class is the one the hot path must keep small).
    [[gnu::noinline]] static node* open(header_type& h, std::byte* p, std::size_t n) noexcept {
        node* fresh = node::make(p, n);
        h.classes.push_front(*fresh);
        if constexpr (predicate_remembers_frees<Pred>) h.last = fresh;
        return fresh;
    }

    // Consecutive chunks of one size, p on top, as if freed from the highest
    // down: a new class takes the highest as its host. `aimed` as for
    // deallocate.
    static void deallocate_range(header_type& h, std::byte* p, std::size_t count, std::size_t n,
                                 front_header** aimed = nullptr) noexcept
        requires size_attribute<Attr>
    {
        if (count == 0) return;
        cursor c{h};
        node* cls = c.lookup(Attr::of_chunk(p, n));
        if (cls) {
            if constexpr (predicate_remembers_frees<Pred>) h.last = cls;
        } else {
            cls = open(h, p + --count * n, n);
        }
        deallocate_range_in<Nested>(cls->nested, p, count, n);
        if (aimed) *aimed = &cls->nested;
    }

    // Chunks of one class found once per run of consecutive same-class chunks;
    // a new class takes the run's first chunk as its host.
    static void deallocate_run(header_type& h, std::byte* const* ps, std::size_t count, std::size_t n) noexcept {
        cursor c{h};
        while (count > 0) {
            const std::size_t k = same_class_run(ps, count, [n](std::byte* p) { return Attr::of_chunk(p, n); });
            node* cls = c.lookup(Attr::of_chunk(ps[0], n));
            if (cls) {
                deallocate_run_in<Nested>(cls->nested, ps, k, n);
            } else {
                cls = node::make(ps[0], n);
                deallocate_run_in<Nested>(cls->nested, ps + 1, k - 1, n);
                h.classes.push_front(*cls);
            }
            if constexpr (predicate_remembers_frees<Pred>) h.last = cls;
            ps += k;
            count -= k;
        }
    }

    // Every chunk of every class to f, hosts last (f may overwrite a chunk).
    template <class F>
    static void drain(header_type& h, F&& f) noexcept {
        while (!h.classes.empty()) {
            node& n = h.classes.front();
            h.classes.pop_front();
            Nested::drain(n.nested, f);
            f(n.host());
        }
        if constexpr (predicate_remembers<Pred>) h.last = nullptr;
    }
    static void clear(header_type& h) noexcept { init(h); }
};

} // namespace allotheque
