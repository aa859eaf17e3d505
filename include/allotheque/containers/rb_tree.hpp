// `rb_tree<Attr, Nested, Pred>`: classes of `Attr` in a red-black tree
// (Boost.Intrusive, node inside the host chunk, colour packed in the parent
// pointer). The ordered C-container: lookups in O(log n), and a cursor that
// offers lower_bound and prev (containers/search.hpp), so a fit predicate starts
// at the lower bound instead of walking and `nearest` steps outwards. A tree
// of sizes over a nested partition that can remove a chunk (an element list)
// can remove any chunk too, and so index a coalescing heap (simultaneous.hpp).
#pragma once
#include <algorithm>
#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

#include <boost/intrusive/rbtree.hpp>

#include <allotheque/attributes/attribute.hpp>
#include <allotheque/containers/class_node.hpp>
#include <allotheque/containers/partition.hpp>
#include <allotheque/containers/search.hpp>
#include <allotheque/containers/walk_memo.hpp>
#include <allotheque/predicates/match.hpp>
#include <allotheque/predicates/predicate.hpp>

namespace allotheque {

// MemoSlots: sizes remembered by the fallback walk memo (walk_memo.hpp); each
// costs 40 bytes in the header, so a tree nested inside chunks wants 0.
template <attribute Attr, partition Nested, allocation_predicate Pred = match_first, std::size_t MemoSlots = 32>
struct rb_tree {
    static_assert(Nested::stored_in_chunks,
                  "allotheque::rb_tree: the nested partition keeps system resources in its header (a mapped "
                  "hash table); it can only be the outermost level");
    using value_type = typename Attr::value_type;
    struct node : boost::intrusive::set_base_hook<boost::intrusive::optimize_size<true>,
                                                  boost::intrusive::link_mode<boost::intrusive::normal_link>>,
                  class_node_base<node, Attr, Nested> {};
    struct key_of {
        using type = value_type;
        type operator()(const node& n) const noexcept { return n.value(); }
    };
    using tree_type = boost::intrusive::rbtree<node, boost::intrusive::key_of_value<key_of>,
                                               boost::intrusive::constant_time_size<false>>;
    // The guide of a fallback walk over the tree (guided_cursor): a walk memo
    // (walk_memo.hpp) resumes at a lower bound per request size instead of the
    // first class. Not a size directory, which maps memory: a tree lives in
    // chunks, nested anywhere.
    static constexpr bool memoised =
        MemoSlots > 0 && predicate_guided_walks<Pred> && !size_attribute<Attr> && Nested::size_exact;
    struct header_type {
        tree_type classes;
        [[no_unique_address]] detail::slot<predicate_remembers<Pred>, node*> last{};
        [[no_unique_address]] detail::slot<memoised, walk_memo<value_type, (MemoSlots > 0 ? MemoSlots : 1)>> memo{};
    };

    static constexpr std::size_t min_chunk = std::max(sizeof(node), Nested::min_chunk);
    static constexpr bool size_exact = (size_attribute<Attr> && is_exact_match<Pred>) || Nested::size_exact;
    static constexpr bool address_safe = (!address_attribute<Attr> || can_leave_target<Pred>) && Nested::address_safe;
    static constexpr bool reads_size = size_attribute<Attr> || Nested::reads_size;
    static constexpr bool reads_address = address_attribute<Attr> || Nested::reads_address;
    static constexpr bool stored_in_chunks = true;

    static void init(header_type& h) noexcept { ::new (static_cast<void*>(&h)) header_type(); }
    static void destroy(header_type&) noexcept {}
    static bool prepare(header_type&, std::byte*, std::size_t) noexcept { return true; }
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
        handle first() noexcept { return h.classes.empty() ? nullptr : &*h.classes.begin(); }
        handle next(handle n) noexcept {
            auto it = std::next(h.classes.iterator_to(*n));
            return it == h.classes.end() ? nullptr : &*it;
        }
        handle lookup(value_type v) noexcept {
            auto it = h.classes.find(v);
            return it == h.classes.end() ? nullptr : &*it;
        }
        value_type value(handle n) const noexcept { return n->value(); }
        handle last() const noexcept {
            if constexpr (predicate_remembers<Pred>) return h.last;
            else return nullptr;
        }
        handle lower_bound(value_type v) noexcept {
            auto it = h.classes.lower_bound(v);
            return it == h.classes.end() ? nullptr : &*it;
        }
        handle prev(handle n) noexcept {
            auto it = n ? h.classes.iterator_to(*n) : h.classes.end();
            return it == h.classes.begin() ? nullptr : &*std::prev(it);
        }
    };

    struct memo_cursor : cursor {
        std::size_t size;
        node* walk_start() noexcept {
            const auto st = this->h.memo.where_to_start(size);
            using kind = typename walk_memo<value_type, (MemoSlots > 0 ? MemoSlots : 1)>::start_kind;
            if (st.kind == kind::from_first) return this->first();
            if (st.kind == kind::nothing) return nullptr;
            auto it = this->h.classes.lower_bound(st.from);
            return it == this->h.classes.end() ? nullptr : &*it;
        }
        node* walk_next(node* n) noexcept { return this->next(n); }
        void walk_ended(node* at) noexcept {
            if (!at) this->h.memo.walk_failed(size);
            else this->h.memo.walk_found(size, at->value());
        }
    };

    template <request_like R>
    static std::byte* allocate(header_type& h, const R& r) noexcept {
        auto attempt = [&](node* n) noexcept -> std::byte* {
            if (std::byte* p = Nested::allocate(n->nested, r)) {
                if constexpr (predicate_remembers<Pred>) h.last = n;
                if constexpr (memoised) h.memo.chunk_taken(r.size);
                return p;
            }
            if (!Nested::empty(n->nested) || !Nested::accepts(n->host(), n->host_size(), r)) return nullptr;
            // The class used last is this one, and it disappears with its host:
            // nothing is remembered (as in hash_table, whose emptied class
            // no longer counts as the last one).
            if constexpr (predicate_remembers<Pred>) h.last = nullptr;
            if constexpr (memoised) h.memo.chunk_taken(r.size);
            h.classes.erase(h.classes.iterator_to(*n));
            return n->host();
        };
        const value_type target = Attr::of_request(r);
        if constexpr (memoised) {
            memo_cursor c{{h}, r.size};
            return search<Pred>(c, target, attempt);
        } else {
            cursor c{h};
            return search<Pred>(c, target, attempt);
        }
    }

    static void deallocate(header_type& h, std::byte* p, std::size_t n) noexcept {
        if constexpr (memoised) h.memo.chunk_added(n, Attr::of_chunk(p, n));
        typename tree_type::insert_commit_data data;
        auto [it, fresh] = h.classes.insert_unique_check(Attr::of_chunk(p, n), data);
        node* cls = nullptr;
        if (!fresh) {
            cls = &*it;
            Nested::deallocate(cls->nested, p, n);
        } else {
            cls = node::make(p, n);
            h.classes.insert_unique_commit(*cls, data);
        }
        if constexpr (predicate_remembers_frees<Pred>) h.last = cls;
    }

    static void deallocate_run(header_type& h, std::byte* const* ps, std::size_t count, std::size_t n) noexcept {
        while (count > 0) {
            const std::size_t k = same_class_run(ps, count, [n](std::byte* p) { return Attr::of_chunk(p, n); });
            if constexpr (memoised) h.memo.chunk_added(n, Attr::of_chunk(ps[0], n), k);
            typename tree_type::insert_commit_data data;
            auto [it, fresh] = h.classes.insert_unique_check(Attr::of_chunk(ps[0], n), data);
            node* cls = nullptr;
            if (!fresh) {
                cls = &*it;
                deallocate_run_in<Nested>(cls->nested, ps, k, n);
            } else {
                cls = node::make(ps[0], n);
                deallocate_run_in<Nested>(cls->nested, ps + 1, k - 1, n);
                h.classes.insert_unique_commit(*cls, data);
            }
            if constexpr (predicate_remembers_frees<Pred>) h.last = cls;
            ps += k;
            count -= k;
        }
    }

    // Takes chunk [p, p+n) out wherever it is: what simultaneous<> needs of its
    // index when a merge claims a free neighbour. A chunk below a class's
    // node leaves the nested partition. A host takes its node with it, so
    // the node moves into another chunk of the class (the nested header
    // moves along, the tree's links are swapped in place: O(1), no
    // rebalancing), or the class goes when it holds nothing else.
    // Classes of sizes only: every chunk of a class is then n bytes, so the
    // new host's size is known (a class of addresses holds chunks of any
    // size, and a nested partition cannot say a chunk's size).
    static void remove(header_type& h, std::byte* p, std::size_t n) noexcept
        requires size_attribute<Attr> &&
                 requires(typename Nested::header_type& nh) { Nested::remove(nh, p, n); } &&
                 std::is_move_assignable_v<typename Nested::header_type>
    {
        const auto it = h.classes.find(Attr::of_chunk(p, n));
        node& cls = *it;
        if constexpr (memoised) h.memo.chunk_taken(n);
        if (cls.host() != p) {
            Nested::remove(cls.nested, p, n);
            return;
        }
        if (Nested::empty(cls.nested)) {
            if constexpr (predicate_remembers<Pred>)
                if (h.last == &cls) h.last = nullptr;
            h.classes.erase(it);
            return;
        }
        // Any chunk of the class will do as the new host: ask for one like p.
        request like_p;
        like_p.size = n;
        like_p.hint = p;
        if (std::byte* q = Nested::allocate(cls.nested, like_p)) {
            node* moved = node::make(q, n);
            moved->nested = std::move(cls.nested);
            h.classes.replace_node(it, *moved);
            if constexpr (predicate_remembers<Pred>)
                if (h.last == &cls) h.last = moved;
            return;
        }
        // A nested predicate that serves no request like p's (an address
        // level matching the hint's own class, say): the class is dissolved
        // and its chunks come back one by one, the first as the new host.
        if constexpr (predicate_remembers<Pred>)
            if (h.last == &cls) h.last = nullptr;
        h.classes.erase(it);
        Nested::drain(cls.nested, [&](std::byte* c) noexcept {
            if constexpr (memoised) h.memo.chunk_taken(n);   // deallocate counts it back in
            deallocate(h, c, n);
        });
    }

    // Every chunk of every class to f, each host after its class's chunks.
    template <class F>
    static void drain(header_type& h, F&& f) noexcept {
        h.classes.clear_and_dispose([&](node* n) noexcept {
            Nested::drain(n->nested, f);
            f(n->host());
        });
        if constexpr (predicate_remembers<Pred>) h.last = nullptr;
        if constexpr (memoised) h.memo = {};
    }
    static void clear(header_type& h) noexcept { init(h); }
};

} // namespace allotheque
