// `rb_tree<Attr, Nested, Pred>`: classes of `Attr` in a red-black tree
// (Boost.Intrusive, node inside the host chunk, colour packed in the parent
// pointer). The ordered C-container: lookups in O(log n), and the fit
// predicates start at the lower bound instead of walking.
#pragma once
#include <algorithm>
#include <cstddef>
#include <new>

#include <boost/intrusive/rbtree.hpp>

#include <allotheque/attributes/attribute.hpp>
#include <allotheque/containers/class_node.hpp>
#include <allotheque/containers/partition.hpp>
#include <allotheque/containers/search.hpp>
#include <allotheque/predicates/match.hpp>

namespace allotheque {

template <attribute Attr, partition Nested, allocation_predicate Pred = match_first>
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
    struct header_type {
        tree_type classes;
        [[no_unique_address]] detail::slot<Pred::remembers, node*> last{};
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
            if constexpr (Pred::remembers) return h.last;
            else return nullptr;
        }
    };

    template <request_like R>
    static std::byte* allocate(header_type& h, const R& r) noexcept {
        auto attempt = [&](node* n) noexcept -> std::byte* {
            if (std::byte* p = Nested::allocate(n->nested, r)) {
                if constexpr (Pred::remembers) h.last = n;
                return p;
            }
            if (!Nested::empty(n->nested) || !Nested::accepts(n->host(), n->host_size(), r)) return nullptr;
            if constexpr (Pred::remembers)
                if (h.last == n) h.last = nullptr;
            h.classes.erase(h.classes.iterator_to(*n));
            return n->host();
        };
        const value_type target = Attr::of_request(r);
        if constexpr (Pred::start == start_at::begin &&
                      (Pred::stop == stop_when::greater_equal || Pred::stop == stop_when::min_fit)) {
            // Ordered classes: the first class >= target is also the best fit.
            for (auto it = h.classes.lower_bound(target); it != h.classes.end(); ++it)
                if (std::byte* p = attempt(&*it)) return p;
            return nullptr;
        } else {
            cursor c{h};
            return search<Pred>(c, target, attempt);
        }
    }

    static void deallocate(header_type& h, std::byte* p, std::size_t n) noexcept {
        typename tree_type::insert_commit_data data;
        auto [it, fresh] = h.classes.insert_unique_check(Attr::of_chunk(p, n), data);
        if (!fresh) return Nested::deallocate(it->nested, p, n);
        h.classes.insert_unique_commit(*node::make(p, n), data);
    }

    static void deallocate_run(header_type& h, std::byte* const* ps, std::size_t count, std::size_t n) noexcept {
        while (count > 0) {
            const std::size_t k = same_class_run(ps, count, [n](std::byte* p) { return Attr::of_chunk(p, n); });
            typename tree_type::insert_commit_data data;
            auto [it, fresh] = h.classes.insert_unique_check(Attr::of_chunk(ps[0], n), data);
            if (!fresh) {
                deallocate_run_in<Nested>(it->nested, ps, k, n);
            } else {
                node* cls = node::make(ps[0], n);
                deallocate_run_in<Nested>(cls->nested, ps + 1, k - 1, n);
                h.classes.insert_unique_commit(*cls, data);
            }
            ps += k;
            count -= k;
        }
    }
};

} // namespace allotheque
