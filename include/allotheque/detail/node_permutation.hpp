// detail::node_permutation<Node>: the in-place relayout shared by the hinted
// containers' reorganize() (stl/hinted_tree.hpp, stl/hinted_list.hpp). A
// container lists its nodes in the order it wants them in memory; the k-th of
// that order then goes to the node at the k-th lowest address. Elements move,
// nodes stay: nothing is allocated, and the memory the container holds is the
// same before and after.
//
//   to_rank_addresses  moves[k].from = the k-th node of the wanted order in,
//                      moves sorted by `from` out, each with the node its
//                      element goes to
//   follow_cycles      moves the elements along the permutation's cycles,
//                      carrying one element out of each node before the
//                      element bound for it is stored there (two in flight)
//
// `moves` (one relocation per element, 16 bytes) is the caller's scratch,
// straight from mmap so that its pages go back when the call ends.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>

#include <allotheque/detail/mapped_array.hpp>

namespace allotheque::detail {

template <class Node>
struct node_permutation {
    // `to`: the node's new home, with a mark in its low bit once the element
    // has arrived there (nodes are at least 8-byte aligned).
    struct relocation {
        Node* from;
        std::uintptr_t to;
    };
    using moves_type = mapped_array<relocation>;

    static Node* target(const relocation& e) noexcept { return reinterpret_cast<Node*>(e.to & ~std::uintptr_t{1}); }
    static bool arrived(const relocation& e) noexcept { return e.to & 1u; }
    static void mark_arrived(relocation& e) noexcept { e.to |= 1u; }

    static void sort_by_from(moves_type& m) noexcept {
        std::sort(m.data(), m.data() + m.size(),
                  [](const relocation& a, const relocation& b) { return std::less<>{}(a.from, b.from); });
    }
    // The relocation of node `from` (moves sorted by from).
    static relocation& entry_of(moves_type& m, const Node* from) noexcept {
        return *std::lower_bound(m.data(), m.data() + m.size(), from,
                                 [](const relocation& e, const Node* f) { return std::less<>{}(e.from, f); });
    }

    // The k-th of the wanted order goes to the k-th lowest node. Its rank
    // rides through the sort by node in `to`; sorted, entry k holds the k-th
    // lowest node.
    static void to_rank_addresses(moves_type& m) noexcept {
        for (std::size_t k = 0; k < m.size(); ++k) m[k].to = k;
        sort_by_from(m);
        for (std::size_t i = 0; i < m.size(); ++i) m[i].to = reinterpret_cast<std::uintptr_t>(m[m[i].to].from);
    }

    // carry_out(slot, node) moves the node's element (and what else travels
    // with it) into in-flight slot 0 or 1 and ends the node's life;
    // carry_in(slot, node) builds the node from that slot. Neither may throw:
    // a half-permuted container has no consistent state to go back to.
    template <class CarryOut, class CarryIn>
    static void follow_cycles(moves_type& m, CarryOut&& carry_out, CarryIn&& carry_in) noexcept {
        for (std::size_t i = 0; i < m.size(); ++i) {
            if (arrived(m[i])) continue;
            unsigned a = 0;
            carry_out(a, m[i].from);
            relocation* cur = &m[i];
            for (;;) {
                Node* const dest = target(*cur);
                mark_arrived(*cur);
                relocation& next = entry_of(m, dest);
                if (arrived(next)) {   // dest is the cycle's first node, already carried out
                    carry_in(a, dest);
                    break;
                }
                carry_out(a ^ 1, dest);
                carry_in(a, dest);
                a ^= 1;
                cur = &next;
            }
        }
    }
};

} // namespace allotheque::detail
