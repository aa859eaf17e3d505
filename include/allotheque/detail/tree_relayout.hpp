// detail::tree_relayout<Tree>: the clustered layout behind hinted_set's and
// hinted_map's reorganize() (stl/hinted_tree.hpp says what it is for), over a
// Boost.Intrusive red-black tree whose nodes have a `value` member and are
// built from it.
//
//   clustered_order  which element goes k-th: the tree cut into clusters (a
//                    subtree's top levels, as many as a page of nodes holds),
//                    a cluster, then the clusters below it left to right,
//                    each cluster in van Emde Boas order (its top half of
//                    levels, then each subtree below that, recursively), so
//                    that a parent precedes its children
//   permute          the k-th element of that order into the node at the k-th
//                    lowest address (detail/node_permutation.hpp), links and
//                    colours carried with it, already mapped to their new homes
//
// `moves` (one relocation per element, 16 bytes) is the caller's scratch.
#pragma once
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>
#include <utility>

#include <allotheque/detail/bits.hpp>
#include <allotheque/detail/node_permutation.hpp>

namespace allotheque::detail {

template <class Tree>
struct tree_relayout : node_permutation<typename Tree::value_type> {
    using base = node_permutation<typename Tree::value_type>;
    using node = typename Tree::value_type;
    using value_type = decltype(std::declval<node&>().value);
    using node_traits = typename Tree::node_traits;
    using node_ptr = typename Tree::node_ptr;
    using typename base::moves_type;
    using typename base::relocation;
    using base::entry_of;
    using base::target;

    // Levels per cluster: a complete subtree of them fits a page of nodes.
    static constexpr unsigned cluster_levels =
        std::max(1u, static_cast<unsigned>(std::bit_width(page_size / sizeof(node) + 1)) - 1);

    static node* element(node_ptr p) noexcept { return Tree::value_traits::to_value_ptr(p); }
    static node_ptr hook(node* v) noexcept { return Tree::value_traits::to_node_ptr(*v); }

    // moves[k].from = the k-th node of the clustered order (t not empty).
    static void clustered_order(Tree& t, moves_type& moves) noexcept {
        std::size_t k = 0;
        order_cluster(t.root().pointed_node(), moves, k);
    }

    // The clustered layout in the tree's own nodes. Nothing is allocated.
    static void permute(Tree& t, moves_type& moves) noexcept
        requires std::is_nothrow_move_constructible_v<value_type>
    {
        clustered_order(t, moves);
        base::to_rank_addresses(moves);

        const node_ptr header = t.end().pointed_node();
        auto home = [&](node_ptr p) noexcept -> node_ptr {
            if (!p || p == header) return p;
            return hook(target(entry_of(moves, element(p))));
        };
        const node_ptr root = home(node_traits::get_parent(header));
        const node_ptr leftmost = home(node_traits::get_left(header));
        const node_ptr rightmost = home(node_traits::get_right(header));
        carried held[2];
        base::follow_cycles(
            moves, [&](unsigned a, node* from) noexcept { held[a].load(from, home); },
            [&](unsigned a, node* to) noexcept { held[a].store(to); });
        node_traits::set_parent(header, root);
        node_traits::set_left(header, leftmost);
        node_traits::set_right(header, rightmost);
    }

private:
    // An element in flight: its value, and its links already mapped to homes.
    struct carried {
        alignas(value_type) std::byte raw[sizeof(value_type)];
        node_ptr parent, left, right;
        typename node_traits::color color;

        value_type& value() noexcept { return *std::launder(reinterpret_cast<value_type*>(raw)); }
        template <class Home>
        void load(node* from, Home& home) noexcept {
            const node_ptr h = hook(from);
            parent = home(node_traits::get_parent(h));
            left = home(node_traits::get_left(h));
            right = home(node_traits::get_right(h));
            color = node_traits::get_color(h);
            ::new (static_cast<void*>(raw)) value_type(std::move(from->value));
            from->~node();
        }
        void store(node* to) noexcept {
            ::new (static_cast<void*>(to)) node(std::move(value()));
            value().~value_type();
            const node_ptr h = hook(to);
            node_traits::set_parent(h, parent);
            node_traits::set_left(h, left);
            node_traits::set_right(h, right);
            node_traits::set_color(h, color);
        }
    };

    // The cluster rooted at r, then the clusters hanging below it, left to
    // right. Recursion depth: the tree's height / cluster_levels.
    //
    // Inside a cluster, van Emde Boas order rather than key order, which the
    // first version used: on the map of bench/order (400,000 nodes), in-order
    // walks took 12.8 / 11.6 ns a node on Velox / Medius instead of 20.7 /
    // 17.5, lookups 538 / 696 ns instead of 672 / 688 (medians of four
    // interleaved runs; an earlier four read lookups 589 / 554 against 675 /
    // 669). Both layouts put a cluster in a page; this one puts a parent
    // before its children, and the top levels of every part of a path next
    // to each other.
    static void order_cluster(node_ptr r, moves_type& out, std::size_t& k) noexcept {
        node_ptr below[std::size_t{1} << cluster_levels];
        std::size_t count = 0;
        at_depth(r, cluster_levels, below, count);
        order_levels(r, cluster_levels, out, k);
        for (std::size_t i = 0; i < count; ++i) order_cluster(below[i], out, k);
    }
    // The `levels` top levels of the subtree at p, in van Emde Boas order.
    static void order_levels(node_ptr p, unsigned levels, moves_type& out, std::size_t& k) noexcept {
        if (!p) return;
        if (levels == 1) {
            out[k++].from = element(p);
            return;
        }
        const unsigned top = levels / 2;   // at most cluster_levels / 2
        node_ptr subs[std::size_t{1} << (cluster_levels / 2)];
        std::size_t n = 0;
        at_depth(p, top, subs, n);
        order_levels(p, top, out, k);
        for (std::size_t i = 0; i < n; ++i) order_levels(subs[i], levels - top, out, k);
    }
    // The nodes `depth` levels below p, left to right, appended to out[n...].
    static void at_depth(node_ptr p, unsigned depth, node_ptr* out, std::size_t& n) noexcept {
        if (!p) return;
        if (depth == 0) {
            out[n++] = p;
            return;
        }
        at_depth(node_traits::get_left(p), depth - 1, out, n);
        at_depth(node_traits::get_right(p), depth - 1, out, n);
    }
};

} // namespace allotheque::detail
