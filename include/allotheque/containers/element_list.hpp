// `list<Attr, void, Pred, Links>`: an E-container whose elements are the free
// chunks themselves, searched by their own attribute value (the paper's
// `list<size, best-fit>`). Each chunk is a link plus, for an explicit attribute,
// its stored value; an implicit one is read from the chunk (e.g. a size kept in
// a boundary tag). Chunk sizes differ, so a size search here is a fit, not a
// match: a heap uses it under splitting.
#pragma once
#include <algorithm>
#include <cstddef>
#include <iterator>
#include <new>
#include <type_traits>

#include <allotheque/attributes/attribute.hpp>
#include <allotheque/containers/class_node.hpp>
#include <allotheque/containers/list_fwd.hpp>
#include <allotheque/containers/search.hpp>
#include <allotheque/predicates/predicate.hpp>

namespace allotheque {

template <attribute Attr, allocation_predicate Pred, class Links>
struct list<Attr, void, Pred, Links> {
    struct chunk : Links::hook {
        [[no_unique_address]] detail::slot<Attr::is_explicit, typename Attr::value_type> stored{};
        typename Attr::value_type value() const noexcept {
            if constexpr (Attr::is_explicit) return stored;
            else return Attr::of_chunk(reinterpret_cast<const std::byte*>(this), 0);
        }
    };
    using header_type = typename Links::template container<chunk>;

    // A predicate that does best on ascending classes (best fit) gets them: the
    // list is kept sorted on insertion (equal values go to the front, so an
    // exact bin inserts in O(1)), its cursor offers lower_bound, and allocation
    // stops at the first chunk that fits.
    static constexpr bool sorted = predicate_wants_sorted<Pred>;

    static constexpr std::size_t min_chunk = sizeof(chunk);
    static constexpr bool size_exact = size_attribute<Attr> && is_exact_match<Pred>;
    static constexpr bool address_safe = !address_attribute<Attr> || can_leave_target<Pred>;
    static constexpr bool reads_size = size_attribute<Attr>;
    static constexpr bool reads_address = address_attribute<Attr>;
    static constexpr bool stored_in_chunks = true;

    static void init(header_type& h) noexcept { ::new (static_cast<void*>(&h)) header_type(); }
    static void destroy(header_type&) noexcept {}
    static bool prepare(header_type&, std::byte*, std::size_t) noexcept { return true; }
    static bool empty(const header_type& h) noexcept { return h.empty(); }
    static constexpr std::size_t round_size(std::size_t n) noexcept { return n; }
    template <request_like R>
    static bool accepts(const std::byte* p, std::size_t n, const R& r) noexcept {
        return value_accepts<Pred>(Attr::of_chunk(p, n), Attr::of_request(r));
    }

    struct cursor {
        using handle = chunk*;
        using value_type = typename Attr::value_type;
        header_type& h;
        handle none() const noexcept { return nullptr; }
        handle first() noexcept { return h.empty() ? nullptr : &h.front(); }
        handle next(handle c) noexcept {
            auto it = std::next(h.iterator_to(*c));
            return it == h.end() ? nullptr : &*it;
        }
        handle lookup(value_type v) noexcept {
            for (chunk& c : h)
                if (c.value() == v) return &c;
            return nullptr;
        }
        value_type value(handle c) const noexcept { return c->value(); }
        handle last() const noexcept { return nullptr; }
        // A sorted list is ordered: the first chunk >= v, found by walking.
        handle lower_bound(value_type v) noexcept
            requires sorted
        {
            for (chunk& c : h)
                if (c.value() >= v) return &c;
            return nullptr;
        }
    };
    static_assert(!predicate_remembers<Pred>,
                  "allotheque::list<Attr, void>: an element list keeps no last-used position");

    template <request_like R>
    static std::byte* allocate(header_type& h, const R& r) noexcept {
        cursor c{h};
        return search<Pred>(c, Attr::of_request(r), [&](chunk* e) noexcept -> std::byte* {
            Links::unlink(h, *e);
            return reinterpret_cast<std::byte*>(e);
        });
    }
    static void deallocate(header_type& h, std::byte* p, std::size_t n) noexcept {
        auto* c = ::new (static_cast<void*>(p)) chunk;
        if constexpr (Attr::is_explicit) c->stored = Attr::of_chunk(p, n);
        if constexpr (sorted) {
            const auto v = c->value();
            if constexpr (requires { h.before_begin(); }) {
                auto before = h.before_begin();
                for (auto it = h.begin(); it != h.end() && it->value() < v; ++it) before = it;
                h.insert_after(before, *c);
            } else {
                auto it = h.begin();
                while (it != h.end() && it->value() < v) ++it;
                h.insert(it, *c);
            }
        } else {
            h.push_front(*c);
        }
    }
    static void remove(header_type& h, std::byte* p, std::size_t) noexcept {
        Links::unlink(h, *std::launder(reinterpret_cast<chunk*>(p)));
    }
    // Chunk p's place in the list passes to chunk q of m bytes, which lies
    // past p's links (a free block whose front the block before it grew
    // into): no search, no insertion anew. Called before anything is written
    // over p's bytes (the caller's tags for q may lie on p's links). Unsorted
    // only: in a sorted list q may belong elsewhere.
    static void relocate(header_type& h, std::byte* p, std::byte* q, std::size_t m) noexcept
        requires(!sorted && requires(chunk& c) { Links::relink(h, c, c); })
    {
        chunk& old = *std::launder(reinterpret_cast<chunk*>(p));
        auto* c = ::new (static_cast<void*>(q)) chunk;
        if constexpr (Attr::is_explicit) c->stored = Attr::of_chunk(q, m);
        Links::relink(h, old, *c);
    }
    template <class F>
    static void drain(header_type& h, F&& f) noexcept {
        while (!h.empty()) {
            chunk& c = h.front();
            h.pop_front();
            f(reinterpret_cast<std::byte*>(&c));
        }
    }
    static void clear(header_type& h) noexcept { init(h); }
};

} // namespace allotheque
