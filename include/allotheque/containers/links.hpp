// Link kinds for lists: the links live inside free chunks (Boost.Intrusive with
// normal_link: no auto-unlink bookkeeping, nothing done on destruction, since a
// chunk's storage is simply reused once it leaves the list).
#pragma once
#include <boost/intrusive/list.hpp>
#include <boost/intrusive/slist.hpp>

namespace allotheque {

namespace bi = boost::intrusive;

// One pointer per chunk; unlinking an arbitrary chunk needs its predecessor.
struct singly_linked {
    using hook = bi::slist_base_hook<bi::link_mode<bi::normal_link>>;
    template <class Node>
    using container = bi::slist<Node, bi::linear<true>, bi::constant_time_size<false>, bi::cache_last<false>>;
    template <class Node>
    static void unlink(container<Node>& c, Node& n) noexcept {
        if (&c.front() == &n) c.pop_front();
        else c.erase_after(c.previous(c.iterator_to(n)));
    }
};

// Two pointers per chunk; O(1) unlinking of any chunk (what coalescing needs).
struct doubly_linked {
    using hook = bi::list_base_hook<bi::link_mode<bi::normal_link>>;
    template <class Node>
    using container = bi::list<Node, bi::constant_time_size<false>>;
    template <class Node>
    static void unlink(container<Node>& c, Node& n) noexcept { c.erase(c.iterator_to(n)); }
    // `fresh` (in no list) takes n's place, n leaves: O(1), as unlink. Only
    // n's links are read, so fresh may lie on any of n's bytes after them.
    template <class Node>
    static void relink(container<Node>& c, Node& n, Node& fresh) noexcept {
        c.insert(c.iterator_to(n), fresh);
        c.erase(c.iterator_to(n));
    }
};

template <class L>
concept link_kind = requires { typename L::hook; };

} // namespace allotheque
