// `hash_table<Attr, Nested, Pred, Hash>`: classes of `Attr` in a table indexed
// by a hash function (see hashes/). Lookup is one index; "first non-empty" and
// "next non-empty" come from the index's bitmaps, so the fallback predicates do
// not walk empty classes. The table lives in the heap's root (or is mapped), not
// in chunks, so a hash table is the outermost level of a partition.
//
// Over exact sizes, a predicate that walks for the first class able to serve
// (`guided_walks`: match_first, match_last_first...) gets a size directory
// beside the classes (containers/size_directory.hpp): a size-major index of
// the address-major partition, so "the lowest class holding a chunk of size s"
// skips every class without one. Lookups and hits never read it; frees write
// one bit.
//
// With such a predicate over addresses (match_last_first), whose classes hand
// back the chunk freed last, a free into an empty class is kept aside instead
// of creating the class: the next request of that size takes it whenever the
// search would have (the target's class is its class, or cannot serve and
// the free's class is the last used), and any other operation links it in
// first. Placement is the same; steady churn, a free then an allocation of
// its size, no longer creates and empties a class each time.
#pragma once
#include <algorithm>
#include <bit>
#include <cstddef>
#include <new>
#include <type_traits>

#include <allotheque/attributes/attribute.hpp>
#include <allotheque/containers/class_index.hpp>
#include <allotheque/containers/class_node.hpp>
#include <allotheque/containers/partition.hpp>
#include <allotheque/containers/search.hpp>
#include <allotheque/containers/size_directory.hpp>
#include <allotheque/containers/size_fronts.hpp>
#include <allotheque/detail/bits.hpp>
#include <allotheque/hashes/hash_function.hpp>
#include <allotheque/predicates/predicate.hpp>

namespace allotheque {

namespace detail {
// A nested partition that links a range of consecutive chunks and says where
// they went (list<size>::deallocate_range): a concept, so that a partition
// without front_header makes it false rather than an error.
template <class N>
concept links_ranges_aimed = requires(typename N::header_type& c, std::byte* p, std::size_t n,
                                      typename N::front_header** a) { N::deallocate_range(c, p, n, n, a); };

// Classes wider than four pages (hash_table::forgets_emptied_sizes).
template <class Attr>
inline constexpr bool wide_classes = [] {
    if constexpr (requires { Attr::class_bytes; }) return Attr::class_bytes > 4 * page_size;
    else return false;
}();
} // namespace detail

namespace detail {
// What a table without sized classes keeps for them: nothing.
struct no_size_fronts {
    struct state {};
};
} // namespace detail

template <attribute Attr, partition Nested, allocation_predicate Pred, hash_function<Attr> Hash>
struct hash_table {
    static_assert(!size_attribute<Attr> || size_segregation<Hash>,
                  "allotheque::hash_table: a size hash must say which chunk size serves each class (round)");
    static_assert(requires { typename Hash::template index<Attr, int, hash_init_placeholder>; },
                  "allotheque::hash_table: this hash function cannot index this attribute");

    struct init_header {
        void operator()(typename Nested::header_type& h) const noexcept { Nested::init(h); }
    };
    using hashed_index = typename Hash::template index<Attr, typename Nested::header_type, init_header>;
    // A table searched only by lookup (match_only) needs no bitmap of non-empty
    // classes: when it is small, every header is built up front and a lookup is
    // one array access, as in a hand-written segregated allocator.
    static constexpr bool walks = !predicate_lookup_only<Pred>;
    using index_type = std::conditional_t<
        !walks && hashed_index::classes * sizeof(typename Nested::header_type) <= detail::inline_table_limit,
        direct_index<hashed_index::classes, typename Nested::header_type, init_header>, hashed_index>;
    // A class holds a chunk of the request's size or cannot serve it: what
    // makes a failed attempt proof that the class lacks the size.
    static constexpr bool directed = predicate_guided_walks<Pred> && !size_attribute<Attr> && Nested::size_exact;
    using directory_type = size_directory<std::bit_width(index_type::classes - 1)>;
    // Whether an allocation that takes a class's last chunk of a size clears
    // the size's directory bit there. Over wide classes (Velox' 64 KiB
    // vicinities, dozens of sizes each) a bit left behind costs the next
    // search for the size a walk of a long size list to fail; over classes
    // of a page (Medius) the lists are short and the bit comes back at the
    // next free of the size, so clearing it cost more than the failed looks
    // (callgrind, random sizes, mean of six arena placements: Velox' malloc
    // 467 -> 438 instructions a step; Medius' 561 -> 582 when it cleared too).
    static constexpr bool forgets_emptied_sizes = directed && detail::wide_classes<Attr>;
    static constexpr bool holds_last_free =
        address_attribute<Attr> && predicate_takes_last_free<Pred> && partition_returns_last_free<Nested>;
    struct held_chunk {
        std::byte* p = nullptr;   // nullptr: nothing held
        std::size_t n = 0;
        std::size_t i = 0;   // its class
    };
    // Per chunk size, the class a run of operations of that size went to last
    // and that size's chunks there: an allocation whose target is that class
    // and a free into it go straight to those chunks (a compare and a push or
    // pop) instead of finding the class, then the size in it. One entry per
    // size (a direct-mapped table by size), so that interleaved sizes (a
    // batch of 32..64 B objects, nodes of two types) each keep theirs. Only
    // where the search tries the target's class first (holds_last_free), so
    // the chunk is the one the search would take, and over classes whose size
    // level offers its chunks (list::has_front). Every slow allocation or free
    // aims its size's entry at the class it used (an allocation that handed
    // out the size's host clears it: the chunks lived in the host); a class
    // drained or a chunk removed clears them all.
    //
    // An entry also knows where the search's last resort (the lowest class
    // holding the size, from the directory) ends for its size: `low`, set by
    // a walk that ended there, lowered by a free that links the size into a
    // class below it, and gone with the entry (a host handed out, a class
    // drained, another size taking the slot). A walk for the size starts
    // there; an allocation whose target and last classes the directory says
    // lack the size, and whose entry's class is `low`, pops there at once.
    // Medius' pages hold one size each, so "the previous allocation's page"
    // lacks any other size, and mixed sizes took the walk on four
    // allocations in five.
    //
    // Behind the entries by size, the slow paths keep the same by (class,
    // size) pair: a direct-mapped table of the pairs that frees linked into
    // lately, each with its chunks, so that a free into a class other than its
    // size's entry's, and an allocation whose hint's class is not the entry's,
    // find the size's chunks there without the search: hints scattered over
    // many classes, one size (debruijn's list nodes, each hinted with its
    // neighbour), missed the entry on most operations. A pair leaves the
    // table with its host, like an entry.
    static constexpr bool has_front = holds_last_free && requires { requires Nested::has_front; };
    // 32 bytes, so that finding a size's entry is a mask and a shift.
    struct alignas(32) front_entry {
        std::size_t i = npos;
        std::size_t n = 0;
        void* chunks = nullptr;   // Nested::front_header*
        std::size_t low = npos;   // the lowest class holding size n, when known
    };
    static constexpr std::size_t front_slots = 128;
    static constexpr std::size_t pair_slots = 512;
    struct front_cache {
        front_entry of[front_slots]{};
        front_entry pairs[pair_slots]{};   // by (class, size); `low` unused
    };
    // Over a table of exact sizes (Velox over the segregated heap's classes:
    // velox_classed_partition), a class's chunks of a size are one index
    // away: no size node to find, no host chunk to hand out, so none of the
    // caches above is needed; the search is size_fronts', for the predicates
    // whose order it keeps (the target's class, the class used last, the
    // lowest class holding the size). A class, once made, stays (emptying a
    // size does not empty a class, and a class no longer tells whether it is
    // empty without a look at every size).
    static constexpr bool sized = address_attribute<Attr> && directed && requires {
        requires Nested::indexes_sizes;
        requires Pred::start == start_at::lookup;
        requires Pred::fallback == fallback_to::first || Pred::fallback == fallback_to::last_then_first;
    };
    static_assert(!predicate_last_per_size<Pred> || sized,
                  "allotheque::hash_table: a predicate that keeps the class used last per size (last_per_size, "
                  "match_size_last_first) needs an address attribute over a table of sizes, as in "
                  "medius_classed_partition");
    using fronts = std::conditional_t<sized, size_fronts<Nested, Pred>, detail::no_size_fronts>;
    struct header_type {
        index_type classes;
        std::size_t last = npos;
        [[no_unique_address]] detail::slot<has_front, front_cache> front{};
        [[no_unique_address]] detail::slot<holds_last_free, held_chunk> held{};
        [[no_unique_address]] detail::slot<directed, directory_type> sizes{};
        [[no_unique_address]] detail::slot<sized, typename fronts::state> by_size{};
    };

    static constexpr std::size_t min_chunk = Nested::min_chunk;
    // The largest chunk the table has a class for, where its hash (or a
    // nested table's) bounds the sizes.
    static constexpr std::size_t max_chunk = [] {
        if constexpr (size_attribute<Attr> && requires { Hash::max_size; }) return std::size_t{Hash::max_size};
        else if constexpr (requires { Nested::max_chunk; }) return std::size_t{Nested::max_chunk};
        else return ~std::size_t{0};
    }();
    static constexpr bool size_exact =
        (size_attribute<Attr> && is_exact_match<Pred> && Hash::exact) || Nested::size_exact;
    static constexpr bool address_safe = (!address_attribute<Attr> || can_leave_target<Pred>) && Nested::address_safe;
    static constexpr bool reads_size = size_attribute<Attr> || Nested::reads_size;
    static constexpr bool reads_address = address_attribute<Attr> || Nested::reads_address;
    static constexpr bool stored_in_chunks = false;
    // This level as such a table of sizes: each class one size, looked up
    // directly, its chunks a plain stack.
    static constexpr bool indexes_sizes = size_attribute<Attr> && size_exact && !walks &&
                                          std::is_same_v<index_type, direct_index<index_type::classes, typename Nested::header_type, init_header>> &&
                                          requires { requires Nested::terminal; };
    static constexpr std::size_t size_classes = index_type::classes;

    static void init(header_type& h) { ::new (static_cast<void*>(&h)) header_type(); }
    static void destroy(header_type& h) noexcept { h.~header_type(); }
    static bool empty(const header_type& h) noexcept {
        if constexpr (holds_last_free)
            if (h.held.p) return false;
        for (std::size_t i = h.classes.first(); i != npos; i = h.classes.next(i))
            if (!Nested::empty(*const_cast<header_type&>(h).classes.find(i))) return false;
        return true;
    }
    // Forced inline, as Hash::round: the malloc libraries round every
    // request with it on their fast paths.
    [[gnu::always_inline]] static constexpr std::size_t round_size(std::size_t n) noexcept {
        if constexpr (size_attribute<Attr>) return Nested::round_size(Hash::round(n));
        else return Nested::round_size(n);
    }
    template <request_like R>
    static bool accepts(const std::byte* p, std::size_t n, const R& r) noexcept {
        return value_accepts<Pred>(class_of(Attr::of_chunk(p, n)), class_of(Attr::of_request(r))) &&
               Nested::accepts(p, n, r);
    }
    // Makes sure every class a chunk in [p, p+n) can fall in has its metadata.
    static bool prepare(header_type& h, std::byte* p, std::size_t n) noexcept {
        if constexpr (address_attribute<Attr>)
            return h.classes.prepare(class_of(Attr::of_chunk(p, n)), class_of(Attr::of_chunk(p + n - 1, 1)));
        else return true;
    }
    static std::size_t metadata_bytes(const header_type& h) noexcept { return h.classes.metadata_bytes(); }

    struct cursor {
        using handle = std::size_t;
        using value_type = std::size_t;
        header_type& h;
        handle none() const noexcept { return npos; }
        handle first() const noexcept { return h.classes.first(); }
        handle next(handle i) const noexcept { return h.classes.next(i); }
        handle lookup(value_type i) const noexcept { return i != npos && h.classes.contains(i) ? i : npos; }
        value_type value(handle i) const noexcept { return i; }
        handle last() const noexcept { return h.last != npos && h.classes.contains(h.last) ? h.last : npos; }
        // Classes are ordered by index: the bitmap finds the first non-empty one from v.
        handle lower_bound(value_type i) const noexcept { return i == 0 ? h.classes.first() : h.classes.next(i - 1); }
    };
    // The walk visits only the classes the directory says may hold the size;
    // a class that could not serve loses its bit. Sizes the directory does not
    // vouch for are walked over every non-empty class.
    //
    // The target's and the last-used class pass the same guide: a class the
    // directory says lacks the size is no class to try (looking for the size
    // in it would walk its whole size list to fail).
    struct directed_cursor : cursor {
        std::size_t size;
        std::size_t lookup(std::size_t i) const noexcept { return may_serve(cursor::lookup(i)); }
        std::size_t last() const noexcept { return may_serve(cursor::last()); }
        // The size's entry may know where the walk ends: there at once.
        std::size_t walk_start() const noexcept {
            if constexpr (has_front) {
                const front_entry& e = front_of(this->h, size);
                if (e.n == size && e.low != npos) return e.low;
            }
            return candidate(0);
        }
        std::size_t walk_next(std::size_t i) const noexcept {
            if (!this->h.sizes.vouches(size)) return this->next(i);
            this->h.sizes.forget(size, i);
            return candidate(i + 1);
        }
        // The walk's class is the lowest holding the size: the size's entry
        // keeps it (unless the attempt handed the size's host out there,
        // which dropped the entry).
        void walk_ended(std::size_t i) const noexcept {
            if constexpr (has_front) {
                front_entry& e = front_of(this->h, size);
                if (i != npos && e.n == size) e.low = i;
            }
        }

    private:
        std::size_t may_serve(std::size_t i) const noexcept { return lacks<false>(this->h, size, i) ? npos : i; }
        std::size_t candidate(std::size_t from) const noexcept {
            if (!this->h.sizes.vouches(size)) return this->lower_bound(from);
            return this->h.sizes.next_present(size, from, [&](std::size_t i) { return this->h.classes.contains(i); });
        }
    };

    // With a front, the fast path is a compare and a pop (try_allocate_fast),
    // forced inline, and everything else one call out of line: inlined, the
    // search's register pressure made every Velox malloc save six registers.
    // Without a front (Lea's size bins) the compiler keeps its choice.
    template <request_like R>
    [[gnu::always_inline]] static std::byte* allocate(header_type& h, const R& r) noexcept
        requires has_front
    {
        if (std::byte* p = try_allocate_fast(h, r)) [[likely]] return p;
        // A copy goes out of line: had r's address escaped, the caller would
        // build its request in memory on every call and read it back after
        // (the header-only Velox and Medius paid 7 instructions a pair).
        const R missed = r;
        return allocate_missed(h, missed);
    }
    // The fast path alone, for a caller with a slow path of its own
    // (heap::try_allocate_cached, under the malloc): a pop when the size's
    // entry names the target's class, else nullptr with nothing changed. It
    // calls nothing and leaves the other ends of the search to allocate
    // (whose directory tests took four more registers, which every malloc
    // saved and restored).
    template <request_like R>
    [[gnu::always_inline]] static std::byte* allocate_cached(header_type& h, const R& r) noexcept
        requires has_front
    {
        return try_allocate_fast<false>(h, r);
    }
    // What allocate does after allocate_cached found nothing (its caller's
    // slow path): the same answer, without trying the entry again.
    template <request_like R>
    static std::byte* allocate_uncached(header_type& h, const R& r) noexcept
        requires has_front
    {
        return allocate_missed(h, r);
    }
    // Over a table of sizes: the size's front inline, the rest of the search
    // one call (size_fronts).
    template <request_like R>
    [[gnu::always_inline]] static std::byte* allocate(header_type& h, const R& r) noexcept
        requires sized
    {
        const std::size_t k = size_class_of_request(r);
        if (std::byte* p = pop_sized(h, r, k)) [[likely]] return p;
        return fronts::search(h, sized_target(h, r, k), k, r.size);
    }
    template <request_like R>
    [[gnu::always_inline]] static std::byte* allocate_cached(header_type& h, const R& r) noexcept
        requires sized
    {
        return pop_sized(h, r, size_class_of_request(r));
    }
    template <request_like R>
    static std::byte* allocate_uncached(header_type& h, const R& r) noexcept
        requires sized
    {
        const std::size_t k = size_class_of_request(r);
        return fronts::search(h, sized_target(h, r, k), k, r.size);
    }

private:
    // The front's pop: without a hint, under a predicate that remembers, the
    // front is the target (sized_target), so no class is compared.
    template <request_like R>
    [[gnu::always_inline]] static std::byte* pop_sized(header_type& h, const R& r, std::size_t k) noexcept
        requires sized
    {
        if constexpr (predicate_remembers<Pred>)
            if (!r.hint) return fronts::pop_remembered(h, k);
        return fronts::pop_front(h, target_class(h, r), k);
    }
    // A request without a hint, under a predicate that remembers, targets
    // the class its size was last taken from or freed into (the size's
    // front), else the class used last: the chunk a free of the size just
    // put back, still in cache, comes first.
    template <request_like R>
    [[gnu::always_inline]] static std::size_t sized_target(const header_type& h, const R& r, std::size_t k) noexcept
        requires sized
    {
        if constexpr (predicate_remembers<Pred>)
            if (!r.hint) return fronts::remembered(h, k);
        return target_class(h, r);
    }
    template <request_like R>
    [[gnu::always_inline]] static std::size_t size_class_of_request(const R& r) noexcept
        requires sized
    {
        if constexpr (requires { r.class_index; }) return r.class_index;
        else return Nested::size_class_of(r.size);
    }

public:
    // A table of sizes' own steps, for the address level above: the class
    // of a chunk size, the chunks of class k, a pop and a push there.
    using chunk_list = typename Nested::header_type;
    [[gnu::always_inline]] static std::size_t size_class_of(std::size_t n) noexcept
        requires indexes_sizes
    {
        // Not classify(n).index: classify is not forced inline, and Velox's
        // aligned malloc then called it (140 -> 148 instructions a pair).
        return classify_size<Hash, Attr>(n).index;
    }
    static constexpr std::size_t class_bytes(std::size_t k) noexcept
        requires indexes_sizes && requires { Hash::size_of_class(k); }
    {
        return Hash::size_of_class(k);
    }
    // Every size has its stack here (size_ways' interface, where a size may
    // have none).
    [[gnu::always_inline]] static chunk_list* find_chunks(header_type& h, std::size_t k) noexcept
        requires indexes_sizes
    {
        return h.classes.find(k);
    }
    struct claim {
        chunk_list* chunks;
        std::size_t evicted;
    };
    [[gnu::always_inline]] static claim claim_chunks(header_type& h, std::size_t k) noexcept
        requires indexes_sizes
    {
        return {h.classes.find(k), npos};
    }
    [[gnu::always_inline]] static bool holds_chunks(const chunk_list& l) noexcept
        requires indexes_sizes
    {
        return !Nested::empty(l);
    }
    [[gnu::always_inline]] static std::byte* pop_chunk(chunk_list& l) noexcept
        requires indexes_sizes
    {
        return Nested::allocate(l, request{});
    }
    [[gnu::always_inline]] static void push_chunk(chunk_list& l, std::byte* p, std::size_t n) noexcept
        requires indexes_sizes
    {
        Nested::deallocate(l, p, n);
    }

    // A lookup in one class (no walk: match_only) is inlined by force. Left
    // to g++'s unit-growth limit, it was inlined into the segregated
    // library's aligned_alloc or not depending on how much unrelated code the
    // library held (91 or 117 instructions a pair); a walk over classes
    // (Lea's first fit) stays a call, which its malloc is faster with.
    template <request_like R>
    [[gnu::always_inline]] static std::byte* allocate(header_type& h, const R& r) noexcept
        requires(!has_front && !sized && !walks)
    {
        return allocate_unfronted(h, r);
    }
    template <request_like R>
    static std::byte* allocate(header_type& h, const R& r) noexcept
        requires(!has_front && !sized && walks)
    {
        return allocate_unfronted(h, r);
    }
    template <request_like R>
    [[gnu::always_inline]] static std::byte* allocate_unfronted(header_type& h, const R& r) noexcept {
        if constexpr (holds_last_free)
            if (h.held.p) return allocate_holding(h, r);
        return search_classes(h, r);
    }

private:
    // The request's size entry names its target class, or (Ends) the class
    // where the search would end (search_ends_at): a pop there, which is the
    // chunk the search would take. Else nullptr, nothing changed.
    //
    // A held chunk does not matter to the first: the entry's class exists
    // (it has chunks of the size), and a chunk is held only where its class
    // does not, so the search would pop the same chunk from the target and
    // leave the held one held. It matters to the search's other ends: it may
    // lie in the target's class or below the walk's end.
    template <bool Ends = true, request_like R>
    [[gnu::always_inline]] static std::byte* try_allocate_fast(header_type& h, const R& r) noexcept
        requires has_front
    {
        const front_entry& e = front_of(h, r.size);
        if (e.n != r.size) return nullptr;
        if (const std::size_t t = target_class(h, r); e.i != t) {
            if constexpr (!Ends) return nullptr;
            else if (h.held.p || !search_ends_at<true>(h, e, t, r.size)) return nullptr;
        }
        return take_front(h, e, r);
    }
    // What the front could not serve: the held chunk, the target's pair,
    // an entry where the search ends that the fast path could not tell, or
    // the search. Out of line, so that the fast path, inlined into every
    // caller, saves no registers; the pair's pop calls nothing, and the rest
    // is one more call, so that the common miss of a hinted request saves
    // none either.
    //
    // Where the request has a hint, the pair comes first: a target holding
    // the size is where the search ends anyway, and the entry's test asks
    // the directory whether the target lacks it (debruijn under velox_heap:
    // 96 % of the misses popped at the pair, after that question had cost
    // 35 instructions each). Without one, the target is the class used
    // last, by any size, which seldom holds this one (Medius' pages hold one
    // size each; random sizes cost 4 instructions a step more with the pair
    // first).
    template <request_like R>
    [[gnu::noinline]] static std::byte* allocate_missed(header_type& h, const R& r) noexcept
        requires has_front
    {
        if (h.held.p) return allocate_holding(h, r);
        const std::size_t t = target_class(h, r);
        if (r.hint)
            if (std::byte* p = take_pair(h, r, t)) return p;
        return allocate_searching(h, r, t);
    }
    template <request_like R>
    [[gnu::noinline]] static std::byte* allocate_searching(header_type& h, const R& r, std::size_t t) noexcept
        requires has_front
    {
        if (std::byte* p = take_where_search_ends(h, r, t)) return p;
        if (!r.hint)
            if (std::byte* p = take_pair(h, r, t)) return p;
        return search_classes(h, r);
    }
    // A pop from the size's entry where the search from target t would end
    // there (search_ends_at, asking the directory).
    template <request_like R>
    [[gnu::always_inline]] static std::byte* take_where_search_ends(header_type& h, const R& r,
                                                                    std::size_t t) noexcept
        requires has_front
    {
        const front_entry& e = front_of(h, r.size);
        if (e.n == r.size && e.i != t && search_ends_at<false>(h, e, t, r.size)) return take_front(h, e, r);
        return nullptr;
    }
    // A pop from the target's chunks of the size, where the pair table has
    // them: the search's first attempt, without the search.
    template <request_like R>
    [[gnu::always_inline]] static std::byte* take_pair(header_type& h, const R& r, std::size_t t) noexcept
        requires has_front
    {
        void* chunks = t != npos ? pair_chunks(h, r.size, t) : nullptr;
        if (!chunks) return nullptr;
        std::byte* p = Nested::front_pop(chunks_at(chunks), r);
        if (p) {
            point(h, r.size, t, chunks);
            h.last = t;
        }
        return p;
    }
    // A pop from the chunks e names; their class becomes the last used.
    template <request_like R>
    [[gnu::always_inline]] static std::byte* take_front(header_type& h, const front_entry& e, const R& r) noexcept
        requires has_front
    {
        std::byte* p = Nested::front_pop(chunks_of(e), r);
        if (p) h.last = e.i;
        return p;
    }
    template <request_like R>
    [[gnu::always_inline]] static std::byte* search_classes(header_type& h, const R& r) noexcept {
        auto c = [&] {
            if constexpr (directed) return directed_cursor{{h}, r.size};
            else return cursor{h};
        }();
        return search<Pred>(c, target_class(h, r),
                            [&](std::size_t i) noexcept -> std::byte* { return take_from(h, i, r); });
    }
    // Out of line, so that the search above stays inlined where allocate is
    // (a LIFO run of allocations holds nothing after its first).
    template <request_like R>
    [[gnu::noinline]] static std::byte* allocate_holding(header_type& h, const R& r) noexcept {
        std::byte* const p = h.held.p;
        const std::size_t i = h.held.i;
        if (h.held.n == r.size) {
            // The search's own order: the target's class (where the held chunk
            // would be on top if t == i), then the class used last.
            const std::size_t t = target_class(h, r);
            if (t != i && t != npos && h.classes.contains(t))
                if (std::byte* q = take_from(h, t, r)) return q;
            if (t == i || h.last == i) {
                h.held.p = nullptr;
                h.last = i;
                return p;
            }
        }
        link_held(h);
        return search_classes(h, r);
    }

public:
    // Takes chunk [p, p+n) out wherever it is (what a simultaneous partition
    // needs when another partition claims the chunk). Needs a nested partition
    // that can remove an element. A call: inlined into Lea's trim and free
    // (the malloc unit free to grow), it cost the Lea library's aligned pair
    // 8 instructions.
    [[gnu::noinline]] static void remove(header_type& h, std::byte* p, std::size_t n) noexcept
        requires requires(typename Nested::header_type& nh) { Nested::remove(nh, p, n); }
    {
        if constexpr (holds_last_free)
            if (h.held.p == p) {
                h.held.p = nullptr;
                return;
            }
        const std::size_t i = class_of(Attr::of_chunk(p, n));
        auto& nested = *h.classes.find(i);
        Nested::remove(nested, p, n);
        if constexpr (has_front) forget_fronts(h);   // the size's class may be gone
        if (Nested::empty(nested)) h.classes.release(i);
    }

    // Chunk [p, p+n) becomes [q, q+m), q past p's links (a free block whose
    // front the block before it grew into: the Lea heap's realloc in place).
    // Where both sizes have one class, p's entry moves to q in place: no class
    // found twice, no class emptied and filled again (the Lea library's
    // realloc, a removal and an insertion before: 402 -> 344 instructions).
    // false, nothing changed, where they differ. Before q's chunk is written.
    static bool relocate(header_type& h, std::byte* p, std::size_t n, std::byte* q, std::size_t m) noexcept
        requires(size_attribute<Attr> && !holds_last_free &&
                 requires(typename Nested::header_type& nh) { Nested::relocate(nh, p, q, m); })
    {
        const std::size_t i = class_of(n);
        if (i != class_of(m)) return false;
        Nested::relocate(*h.classes.find(i), p, q, m);
        return true;
    }

    // A size level resolves a size into (chunk size, class) in one step; a
    // heap passes the class down in a classified<> request and to the
    // four-argument deallocate, so the size is hashed once per call.
    static constexpr size_class classify(std::size_t n) noexcept
        requires(size_attribute<Attr> && size_segregation<Hash>)
    {
        const size_class c = classify_size<Hash, Attr>(n);
        return {Nested::round_size(c.size), c.index};
    }
    // Over a table of sizes, a size's class is the nested table's: the heap
    // passes it down the same way, and this level finds the address's.
    static constexpr size_class classify(std::size_t n) noexcept
        requires sized
    {
        return Nested::classify(n);
    }
    // Chunk [p, p+n) whose class is `i` (from classify).
    static void deallocate(header_type& h, std::byte* p, std::size_t n, std::size_t i) noexcept
        requires(!sized)
    {
        put(h, p, n, i);
    }
    [[gnu::always_inline]] static void deallocate(header_type& h, std::byte* p, std::size_t n, std::size_t k) noexcept
        requires sized
    {
        fronts::put(h, p, n, class_key(p, n), class_of(Attr::of_chunk(p, n)), k);
    }

    // Where a table of sizes keeps each size's stack in place (no stack
    // handed from one size to another), the stack a run of chunks of size
    // class k in [p, p+n) goes on, made ready now, or where they span two
    // classes a stack that is never pushed to. The heap keeps it per span
    // (span::in_use.chunks) and passes it, or what finds it, to the
    // five-argument deallocate. After prepare(p, n).
    static constexpr bool keeps_span_chunks = [] {
        if constexpr (sized) return !fronts::spills;
        else return false;
    }();
    static void* span_chunks(header_type& h, std::byte* p, std::size_t n, std::size_t k) noexcept
        requires keeps_span_chunks
    {
        const std::size_t i = class_of(Attr::of_chunk(p, 1));
        if (i != class_of(Attr::of_chunk(p + n - 1, 1))) return fronts::no_stack();
        return Nested::find_chunks(h.classes.obtain(i), k);
    }
    // How many of the n bytes from p lie in p's class: a heap that cuts a
    // span shorter to keep it in one class keeps its stack (span_chunks).
    // Only where a class is an aligned run of addresses: elsewhere the heap
    // has nothing to cut at and the member is absent.
    static std::size_t span_room(const std::byte* p, std::size_t n) noexcept
        requires keeps_span_chunks && requires { requires Attr::class_bytes > 0; }
    {
        const std::uintptr_t a = detail::address_of(p);
        return std::min(n, static_cast<std::size_t>((a | (Attr::class_bytes - 1)) - a + 1));
    }
    template <class C>
    [[gnu::always_inline]] static void deallocate(header_type& h, std::byte* p, std::size_t n, std::size_t k,
                                                  const C& chunks) noexcept
        requires keeps_span_chunks
    {
        fronts::put(h, p, n, class_key(p, n), class_of(Attr::of_chunk(p, n)), k, chunks);
    }

    // Over addresses (Velox, Medius) this free is the heap's free itself, and
    // is forced inline: out of line, its register saves cost a LIFO free
    // more than the free does. Over sizes, it is one step of a coalescing
    // free (Lea), where inlining it at every call site made Lea slower.
    [[gnu::always_inline]] static void deallocate(header_type& h, std::byte* p, std::size_t n) noexcept
        requires address_attribute<Attr>
    {
        if constexpr (has_front) put(h, p, n, class_key(p, n), class_of(Attr::of_chunk(p, n)));
        else put(h, p, n, class_of(Attr::of_chunk(p, n)));
    }
    static void deallocate(header_type& h, std::byte* p, std::size_t n) noexcept
        requires(!address_attribute<Attr>)
    {
        put(h, p, n, class_of(Attr::of_chunk(p, n)));
    }

    // One class lookup per run of consecutive chunks that share a class.
    static void deallocate_run(header_type& h, std::byte* const* ps, std::size_t count, std::size_t n) noexcept {
        settle(h);
        // The run may land below the class an entry of n's calls lowest.
        if constexpr (has_front) front_of(h, n) = {};
        while (count > 0) {
            const std::size_t k =
                same_class_run(ps, count, [n](std::byte* p) { return class_of(Attr::of_chunk(p, n)); });
            freed_into(h, class_of(Attr::of_chunk(ps[0], n)), n,
                       [&](auto& c) { deallocate_run_in<Nested>(c, ps, k, n); });
            ps += k;
            count -= k;
        }
    }
    // The same over consecutive chunks, the highest stretch of a class first,
    // so that p's class is the one used last. Not where the table holds the
    // last free aside (holds_last_free: the paper's Velox and Medius), whose
    // frees also aim entries by size: the member below serves those with a
    // front over lists of sizes, and any other goes one chunk at a time.
    static void deallocate_range(header_type& h, std::byte* p, std::size_t count, std::size_t n) noexcept
        requires(!holds_last_free)
    {
        for_each_stretch(p, count, n, [&](std::byte* run, std::size_t k, std::size_t i) {
            freed_into(h, i, n, [&](auto& c) { deallocate_range_in<Nested>(c, run, k, n); });
        });
    }

    // The same where the table holds the last free aside and aims entries
    // by size (the paper's Velox and Medius over lists of exact sizes): a
    // stretch of a class is linked at once and aims its size's entry, as
    // its lowest chunk's free would have; a stretch of one chunk is freed as
    // such (into a class that does not exist, it is held). A refill of
    // velox_heap's one-page spans had freed its chunks one by one: 3,270
    // instructions a refill on treeadd, against 904 for QuickFit's.
    static void deallocate_range(header_type& h, std::byte* p, std::size_t count, std::size_t n) noexcept
        requires has_front && detail::links_ranges_aimed<Nested>
    {
        for_each_stretch(p, count, n, [&](std::byte* run, std::size_t k, std::size_t i) {
            if (k == 1) return put(h, run, n, i);
            // The held chunk is linked first where a free would link it: when
            // the stretch's class is not its size's entry (a held chunk's
            // class does not exist, and this may make it).
            if (const front_entry& e = front_of(h, n); e.i != i || e.n != n) settle(h);
            if constexpr (directed) h.sizes.note(n, i);
            typename Nested::front_header* chunks = nullptr;
            Nested::deallocate_range(h.classes.obtain(i), run, k, n, &chunks);
            aim(h, i, n, chunks);
            h.last = i;
        });
    }
    // Chunks p, p + n, ... (count of them) by stretches of one class, the
    // highest first: f(run, k, i) for the k chunks from run, in class i.
    template <class F>
    static void for_each_stretch(std::byte* p, std::size_t count, std::size_t n, F&& f) noexcept {
        while (count > 0) {
            const std::size_t k =
                same_class_tail<Attr>(p, count, n, [n](std::byte* c) { return class_of(Attr::of_chunk(c, n)); });
            count -= k;
            std::byte* const run = p + count * n;
            f(run, k, class_of(Attr::of_chunk(run, n)));
        }
    }

    // Every chunk of every class to f; the table keeps its mapped metadata.
    // Where spans keep their class's stack (keeps_span_chunks), the classes
    // stay, empty: a free onto a span's emptied stack then pushes there with
    // no lookup of its class (size_fronts::put_emptied), which may not have
    // been given up while a span holds chunks in it.
    template <class F>
    static void drain(header_type& h, F&& f) noexcept {
        settle(h);
        for (std::size_t i = h.classes.first(); i != npos;) {
            const std::size_t next = h.classes.next(i);
            Nested::drain(*h.classes.find(i), f);
            if constexpr (!keeps_span_chunks) h.classes.release(i);
            i = next;
        }
        forget_search_state(h, false);   // the chunks come back at once, most of them
    }
    // Forgets every chunk without looking at one (their memory is going back whole).
    static void clear(header_type& h) noexcept {
        if constexpr (holds_last_free) h.held.p = nullptr;
        for (std::size_t i = h.classes.first(); i != npos;) {
            const std::size_t next = h.classes.next(i);
            Nested::clear(*h.classes.find(i));
            h.classes.release(i);
            i = next;
        }
        forget_search_state(h, true);
    }

private:
    // Chunks of n bytes into class i, which `give` hands to its header.
    template <class Give>
    static void freed_into(header_type& h, std::size_t i, std::size_t n, Give&& give) noexcept {
        if constexpr (directed) h.sizes.note(n, i);
        auto& c = h.classes.obtain(i);
        // A table of sizes claims n's stack through its fronts (a stack
        // another size held drops that size's front), so `give` finds it
        // claimed, and keeps the class used last as its fronts say.
        if constexpr (sized) fronts::claim(h, c, Nested::size_class_of(n));
        give(c);
        if constexpr (sized) fronts::freed_run(h, i, Nested::size_class_of(n));
        if constexpr (!sized && predicate_remembers_frees<Pred>) h.last = i;
    }

    // With a front, a free into its size's entry is a compare and a push,
    // inline; the rest is one call (inlined, its register pressure made
    // every free save six registers).
    [[gnu::always_inline]] static void put(header_type& h, std::byte* p, std::size_t n, std::size_t i) noexcept
        requires has_front
    {
        put(h, p, n, i, i);
    }
    // `key` is i, or a value that equals i or no class at all
    // (class_key), compared in its place so that i is computed on a miss
    // only (velox_heap's free: its class without the mask).
    [[gnu::always_inline]] static void put(header_type& h, std::byte* p, std::size_t n, std::size_t key,
                                           std::size_t i) noexcept
        requires has_front
    {
        const front_entry& e = front_of(h, n);
        // As for an allocation, a held chunk is in another class: linking
        // it first (what the slow path's settle does) can wait for the next
        // operation that reads the classes.
        if (e.i == key && e.n == n) [[likely]] {
            // The class holds the size, so the directory has its bit.
            Nested::front_push(chunks_of(e), p, n);
            h.last = key;
            return;
        }
        put_missed(h, p, n, i);
    }
    // The pair's chunks where no chunk is held (which put_slow would link
    // first, and which may change the size's entry): a push that calls
    // nothing, so that the usual miss saves no registers (debruijn under
    // velox_heap: a free in three missed its size's entry, and the miss
    // spent 19 of its 55 instructions saving and restoring them).
    [[gnu::noinline]] static void put_missed(header_type& h, std::byte* p, std::size_t n, std::size_t i) noexcept
        requires has_front
    {
        if (h.held.p) [[unlikely]]
            return put_holding(h, p, n, i);
        if (push_pair(h, p, n, i)) return;
        put_linking(h, p, n, i);
    }
    [[gnu::noinline]] static void put_holding(header_type& h, std::byte* p, std::size_t n, std::size_t i) noexcept
        requires has_front
    {
        put_slow(h, p, n, i);
    }
    // Chunk p onto the pair's chunks (size n in class i), where the pair
    // table has them: the class exists and holds the size (and has its
    // directory bit), so nothing else changes. False where it has not.
    [[gnu::always_inline]] static bool push_pair(header_type& h, std::byte* p, std::size_t n, std::size_t i) noexcept
        requires has_front
    {
        void* const chunks = pair_chunks(h, n, i);
        if (!chunks) return false;
        Nested::front_push(chunks_at(chunks), p, n);
        point(h, n, i, chunks);
        h.last = i;
        return true;
    }
    // Into class i, found (or held, where it does not exist).
    [[gnu::noinline]] static void put_linking(header_type& h, std::byte* p, std::size_t n, std::size_t i) noexcept
        requires has_front
    {
        link_or_hold(h, p, n, i);
    }
    [[gnu::always_inline]] static void put(header_type& h, std::byte* p, std::size_t n, std::size_t i) noexcept
        requires sized
    {
        fronts::put(h, p, n, i, i, Nested::size_class_of(n));
    }
    [[gnu::always_inline]] static void put(header_type& h, std::byte* p, std::size_t n, std::size_t i) noexcept
        requires(!has_front && !sized)
    {
        put_slow(h, p, n, i);
    }
    [[gnu::always_inline]] static void put_slow(header_type& h, std::byte* p, std::size_t n, std::size_t i) noexcept {
        if constexpr (holds_last_free) {
            settle(h);
            if constexpr (has_front) {
                const front_entry& e = front_of(h, n);
                if (e.i == i && e.n == n) {
                    Nested::front_push(chunks_of(e), p, n);
                    h.last = i;
                    return;
                }
                if (push_pair(h, p, n, i)) return;
            }
            return link_or_hold(h, p, n, i);
        } else {
            link(h, h.classes.obtain(i), p, n, i);
        }
        if constexpr (predicate_remembers_frees<Pred>) h.last = i;
    }
    // Held only where linking would create the class (which the next
    // allocation, in churn, empties again); into a class that exists, the
    // free links at once.
    [[gnu::always_inline]] static void link_or_hold(header_type& h, std::byte* p, std::size_t n,
                                                    std::size_t i) noexcept
        requires holds_last_free
    {
        if (auto* nested = h.classes.find(i)) [[likely]] link(h, *nested, p, n, i);
        else h.held = {p, n, i};
        if constexpr (predicate_remembers_frees<Pred>) h.last = i;
    }
    // Chunk [p, p+n) into class i, whose header is `nested`.
    [[gnu::always_inline]] static void link(header_type& h, typename Nested::header_type& nested, std::byte* p,
                                            std::size_t n, std::size_t i) noexcept {
        if constexpr (directed) h.sizes.note(n, i);
        if constexpr (has_front) {
            typename Nested::front_header* chunks = nullptr;
            Nested::deallocate(nested, p, n, &chunks);
            aim(h, i, n, chunks);
        } else {
            Nested::deallocate(nested, p, n);
        }
    }
    [[gnu::always_inline]] static front_entry& front_of(header_type& h, std::size_t n) noexcept
        requires has_front
    {
        const std::size_t offset = (n & ((front_slots - 1) << 3)) << 2;   // (n / 8 % front_slots) * 32
        return *reinterpret_cast<front_entry*>(reinterpret_cast<std::byte*>(h.front.of) + offset);
    }
    // Size n's entry names class i, which held n already: the lowest class
    // known to hold n stays what it was.
    [[gnu::always_inline]] static void point(header_type& h, std::size_t n, std::size_t i, void* chunks) noexcept
        requires has_front
    {
        front_entry& e = front_of(h, n);
        if (e.n == n) {
            e.i = i;
            e.chunks = chunks;
        } else {
            e = {i, n, chunks};
        }
    }
    [[gnu::always_inline]] static front_entry& pair_of(header_type& h, std::size_t n, std::size_t i) noexcept
        requires has_front
    {
        // 131 classes apart: a class's sizes (n / 8 up to 128 for 1 KiB)
        // and its neighbours' do not collide.
        return h.front.pairs[((n >> 3) + i * 131) & (pair_slots - 1)];
    }
    static void* pair_chunks(header_type& h, std::size_t n, std::size_t i) noexcept
        requires has_front
    {
        const front_entry& e = pair_of(h, n, i);
        return e.i == i && e.n == n ? e.chunks : nullptr;
    }
    // Size n's chunks in class i are `chunks`: its entry and its pair's.
    [[gnu::always_inline]] static void aim(header_type& h, std::size_t i, std::size_t n, void* chunks) noexcept
        requires has_front
    {
        // Class i may hold n from now on, below the lowest known to.
        if (front_entry& e = front_of(h, n); e.n == n && e.low != npos && i < e.low) e.low = i;
        point(h, n, i, chunks);
        pair_of(h, n, i) = {i, n, chunks};
    }
    [[gnu::always_inline]] static auto& chunks_at(void* chunks) noexcept
        requires has_front
    {
        return *static_cast<typename Nested::front_header*>(chunks);
    }
    [[gnu::always_inline]] static auto& chunks_of(const front_entry& e) noexcept
        requires has_front
    {
        return chunks_at(e.chunks);
    }
    // Whether the search for e's size from target t would pass over t and
    // end at e's class: t lacks the size and e's class is the class used last
    // (tried next), or e's class is where the walk ends (front_entry::low)
    // and the class used last lacks the size too. The
    // first is what a hint whose class is full of other sizes meets on every
    // allocation (mst's hash entries, hinted with their vertex, took the
    // search's fallback on a third of its allocations). Never where the
    // directory does not guide the walk (a predicate of one's own that takes
    // the last free without `guided_walks`). Quick: only what the directory
    // tells at a glance (no search for a leaf), so the fast path stays free
    // of loops and calls; a false answer is then "cannot tell". n is e's
    // size, which the caller compared with its request's: taken from the
    // request, which the caller holds in a register anyway (with e's size
    // read again, velox_heap's allocation kept both and saved two registers
    // more on every call).
    template <bool Quick>
    [[gnu::always_inline]] static bool search_ends_at(const header_type& h, const front_entry& e,
                                                      std::size_t t, std::size_t n) noexcept
        requires has_front
    {
        if constexpr (directed) {
            if (h.last != e.i && e.low != e.i) return false;   // the compares first: most misses end here
            return lacks<Quick>(h, n, t) && (h.last == e.i || h.last == t || lacks<Quick>(h, n, h.last));
        } else {
            return false;
        }
    }
    template <bool Quick>
    [[gnu::always_inline]] static bool lacks(const header_type& h, std::size_t n, std::size_t c) noexcept
        requires directed
    {
        if constexpr (Quick) return c == npos || h.sizes.lacks_at_a_glance(n, c);
        else return c == npos || !h.sizes.may_hold(n, c);
    }
    static void forget_fronts(header_type& h) noexcept
        requires has_front
    {
        for (front_entry& e : h.front.of) e = {};
        for (front_entry& e : h.front.pairs) e = {};
    }
    // Links the held chunk in, if there is one, before an operation that
    // reads the classes as they are (a free settles first too).
    [[gnu::always_inline]] static void settle(header_type& h) noexcept {
        if constexpr (holds_last_free)
            if (h.held.p) [[unlikely]] link_held(h);
    }
    // Out of line: an allocation that cannot take the held chunk is on the
    // search's path already.
    [[gnu::noinline]] static void link_held(header_type& h) noexcept {
        link(h, h.classes.obtain(h.held.i), h.held.p, h.held.n, h.held.i);
        h.held.p = nullptr;
    }
    // The class the search tries first. A request with no hint has no class of
    // its own over the hint's address bits: it goes where the search would go
    // next, the class used last (npos if none, which no lookup finds).
    // Without this, its target would be the class of address 0, which over
    // SK-bits (Medius) is a real class: every 2^(S+K)-aligned page.
    template <request_like R>
    [[gnu::always_inline]] static std::size_t target_class(const header_type& h, const R& r) noexcept {
        if constexpr (requires { requires Attr::target_is_hint; })
            if (!r.hint) return h.last;
        return request_class(r);
    }
    template <request_like R>
    static constexpr std::size_t request_class(const R& r) noexcept {
        if constexpr (size_attribute<Attr> && requires { r.class_index; }) return r.class_index;
        else return class_of(Attr::of_request(r));
    }
    static void forget_search_state(header_type& h, bool memory_gone) noexcept {
        h.last = npos;
        if constexpr (sized) h.by_size = {};
        if constexpr (has_front) forget_fronts(h);
        if constexpr (directed) h.sizes.clear(memory_gone);
    }
    template <request_like R>
    [[gnu::always_inline]] static std::byte* take_from(header_type& h, std::size_t i, const R& r) noexcept {
        auto& nested = *h.classes.find(i);
        std::byte* p;
        if constexpr (has_front) {
            typename Nested::front_header* chunks = nullptr;
            p = Nested::allocate(nested, r, &chunks);
            if (!p) return nullptr;
            // No chunks reported: the size's host went out, and its chunks
            // with it (the entry may name another class or size sharing the
            // slot: clearing it only costs that one a search).
            if (chunks) {
                // The front only: the pair table learns of the class from its
                // frees (writing it here too cost Medius' mixed sizes 26
                // instructions an attempt).
                point(h, r.size, i, chunks);
            } else {
                front_of(h, r.size) = {};
                if (front_entry& e = pair_of(h, r.size, i); e.i == i && e.n == r.size) e = {};
                if constexpr (forgets_emptied_sizes) h.sizes.forget(r.size, i);
            }
        } else {
            p = Nested::allocate(nested, r);
            if (!p) return nullptr;
        }
        if (Nested::empty(nested)) {
            h.classes.release(i);
            // The class is gone: its bit for this size would cost the next
            // walk a failed look (churn empties a class on most misses).
            if constexpr (directed) h.sizes.forget(r.size, i);
        }
        if constexpr (predicate_remembers<Pred>) h.last = i;
        return p;
    }
    static constexpr std::size_t class_of(typename Attr::value_type v) noexcept {
        return Hash::template index_of<Attr>(v);
    }
    // Chunk p's class where it equals a class at all (address_bits'
    // key_of_chunk through an identity hash: Velox' free skips a mask), else
    // its class.
    [[gnu::always_inline]] static std::size_t class_key(const std::byte* p, std::size_t n) noexcept {
        if constexpr (requires { requires Hash::identity && Attr::keyed_by_shift; })
            return static_cast<std::size_t>(Attr::key_of_chunk(p));
        else
            return class_of(Attr::of_chunk(p, n));
    }
};

} // namespace allotheque
