// `size_fronts<Nested, Pred>`: the search of an address-keyed hash_table whose
// classes are each a table of exact sizes (Velox over the segregated heap's
// classes: velox_classed_partition). A class's chunks of a size are one index
// away there, so what the table keeps beside its classes is, per size class k:
//
//   front[k]  the class the size was last taken from or freed into and that
//             class's stack of the size: an allocation whose target is that
//             class, and a free into it, is a compare and a pop or push;
//   low[k]    a bound: no class below it holds the size (npos: none does).
//             Frees lower it; the walk for "the lowest class holding the
//             size" starts there and usually pops at once.
//
// The rule is the table's predicate's (match_last_first: the target's class,
// else the class used last, else the lowest class holding the size; match_first
// without the middle step; match_size_last_first with the middle step the
// size's front, so that no class any size touched last is kept or tried).
// Under match_last_first a request without a hint targets its size's front,
// else the class used last: per size, the class used last (a malloc without
// hints then reuses the chunk a free of the size just put back, as a LIFO
// heap does, where the class of the previous allocation, of another size,
// rarely holds the size). An allocation that finds nothing drops the size's
// front.
//
// Invariants the fast paths rely on: a class whose stack of k is not empty
// has its directory bit for k and is at or above low[k]; a front names such a
// class, an emptied stack, or no class (and then no_chunks, an empty list),
// and a class's bit is cleared (lacks) only when its stack is found empty,
// which drops a front naming it. `H` is the table's header: classes, sizes
// (the directory), last, and `by_size`, a `state`.
//
// A nested table that `spills` (size_ways) may keep a size without a stack of
// its own, in a list it searches after the stack; a stack it hands to another
// size (claim_chunks' `evicted`) drops the front naming it, and a class's bit
// goes only when both are empty. Over a direct table all of it compiles out.
#pragma once
#include <algorithm>
#include <cstddef>
#include <numeric>
#include <type_traits>

#include <allotheque/detail/bitmap_tree.hpp>
#include <allotheque/predicates/predicate.hpp>

namespace allotheque {

template <class Nested, class Pred>
struct size_fronts {
    static constexpr std::size_t npos = detail::npos;
    static constexpr bool spills = requires { requires Nested::spills; };
    using chunk_list = typename Nested::chunk_list;
    static constexpr std::size_t no_class = npos - 1;   // not npos, which a request with no target class carries
    // Whether the table keeps the class any size used last (h.last): every
    // pop and free then stores it. Under last_per_size the size's front is
    // the class used last, and h.last is never read.
    static constexpr bool keeps_last = predicate_remembers<Pred> && !predicate_last_per_size<Pred>;
    static constexpr bool frees_keep_last = keeps_last && predicate_remembers_frees<Pred>;
    // What a front with no class names: an empty list, never pushed to (no
    // class index equals no_class), so that a pop through any front is a
    // load and a test, with no test of the class first.
    static inline chunk_list no_chunks{};
    // Where the nested table tells a class's chunk size (spaced_classes), a
    // missed free reads it there, on the paths that need it, rather than
    // taking it from the caller: the caller read it from the chunk's span
    // before the compare on every free (one instruction a Velox or Medius
    // free that hit its front).
    static constexpr bool sizes_by_class = requires { Nested::class_bytes(std::size_t{}); };
    // Where a class's stack of a size holds few chunks (size_ways: Medius'
    // pages), a missed free finds it empty about as often as not, and the
    // branch on it mispredicted often (cachegrind's branch simulation: 3.8
    // million in the Medius library's 11.6 million frees of a threads_bench
    // run, gone without it): such a free then lowers the bound
    // and notes the directory bit without asking, five instructions more a
    // step on random sizes and 3-5 % less time. Velox' vicinities keep many
    // chunks a size, and ask.
    static constexpr bool notes_every_miss = requires { requires Nested::few_chunks_a_size; };
    struct by_class {};
    static std::size_t bytes(std::size_t n, std::size_t) noexcept { return n; }
    [[gnu::always_inline]] static std::size_t bytes(by_class, std::size_t k) noexcept {
        const std::size_t n = Nested::class_bytes(k);
        // What every class's size is, told to the optimiser: the directory's
        // test of a size it indexes then folds away on every missed free.
        if (n > class_bytes_bounds.max || n % class_bytes_bounds.step != 0) __builtin_unreachable();
        return n;
    }
    struct size_bounds {
        std::size_t max = 0, step = 0;
    };
    static constexpr size_bounds class_bytes_bounds = [] {
        size_bounds b;
        if constexpr (sizes_by_class)
            for (std::size_t k = 0; k < Nested::size_classes; ++k) {
                const std::size_t n = Nested::class_bytes(k);
                b.max = std::max(b.max, n);
                b.step = std::gcd(b.step, n);
            }
        return b;
    }();
    // Each front in two arrays rather than an array of pairs: a class index
    // then scales into both by 8 in the address itself, where a 16-byte pair
    // cost every malloc and free a shift and an add.
    struct state {
        std::size_t low[Nested::size_classes];
        std::size_t front_class[Nested::size_classes];
        chunk_list* front_chunks[Nested::size_classes];
        state() noexcept {
            for (std::size_t& v : low) v = npos;
            for (std::size_t& v : front_class) v = no_class;
            for (chunk_list*& v : front_chunks) v = &no_chunks;
        }
    };

    // The class size class k was last taken from or freed into, else the
    // class used last (the target of a request without a hint; npos, no
    // class, where the table keeps none).
    template <class H>
    [[gnu::always_inline]] static std::size_t remembered(const H& h, std::size_t k) noexcept {
        const std::size_t i = h.by_size.front_class[k];
        if constexpr (keeps_last) return i != no_class ? i : h.last;
        else return i != no_class ? i : npos;
    }
    // A request without a hint under a predicate that remembers targets its
    // size's front, so the front's chunks are the target's whenever there
    // are any: a pop, with no compare of classes (a front with no class
    // pops from no_chunks and misses, and the search then targets h.last).
    template <class H>
    [[gnu::always_inline]] static std::byte* pop_remembered(H& h, std::size_t k) noexcept
        requires predicate_remembers<Pred>
    {
        std::byte* p = Nested::pop_chunk(*h.by_size.front_chunks[k]);
        if constexpr (keeps_last)
            if (p) h.last = h.by_size.front_class[k];
        return p;
    }
    // A pop from the chunks the size's front names, when they are the target's.
    template <class H>
    [[gnu::always_inline]] static std::byte* pop_front(H& h, std::size_t t, std::size_t k) noexcept {
        if (h.by_size.front_class[k] != t) return nullptr;
        std::byte* p = Nested::pop_chunk(*h.by_size.front_chunks[k]);
        if constexpr (keeps_last)
            if (p) h.last = t;
        return p;
    }
    // The search once the front could not serve, with the target, the size's
    // class and the size in registers (a copy of the request in memory cost
    // Velox's malloc 7 instructions a miss).
    template <class H>
    [[gnu::noinline]] static std::byte* search(H& h, std::size_t t, std::size_t k, std::size_t n) noexcept {
        // Where the front names the target, pop_front found its stack
        // empty: only the class's list may hold the size, where the nested
        // table spills (the stack's second look costs a load; a caller may
        // have put chunks back in between).
        if (h.by_size.front_class[k] != t) {
            if (std::byte* p = take_at(h, t, k, n)) return p;
        } else if constexpr (spills) {
            if (std::byte* p = Nested::pop_chunk(*h.by_size.front_chunks[k])) return took(h, t, p);
            if (auto* c = h.classes.find(t))
                if (std::byte* p = Nested::take_spilled(*c, n)) return took(h, t, p);
        }
        std::size_t last = npos;
        if constexpr (Pred::fallback == fallback_to::last_then_first) {
            // Per size, the front (a request without a hint targeted it).
            if constexpr (keeps_last) last = h.last;
            else last = remembered(h, k);
            if (last != t)
                if (std::byte* p = take_at(h, last, k, n)) return p;
        }
        std::size_t& low = h.by_size.low[k];
        if (low == npos) {   // no class holds the size
            drop(h, k);
            return nullptr;
        }
        if (low != t && low != last)
            if (std::byte* p = take_at(h, low, k, n)) return p;
        if (!h.sizes.vouches(n)) [[unlikely]]
            return walk_classes(h, t, k, n, last);
        // Where low is the target whose stack was just found empty, its bit
        // stays: a later free into it then finds the bit set, and the walk
        // skips it as it starts above.
        if (low != t) lacks(h, n, k, low);
        // One call of next(), inlined once.
        for (std::size_t i = low; (i = h.sizes.next(n, i + 1)) != npos;) {
            if (i != t && i != last)
                if (std::byte* p = take_at(h, i, k, n)) return low = i, p;
            lacks(h, n, k, i);
        }
        low = npos;
        drop(h, k);
        return nullptr;
    }
    // Chunk [p, p+n) of size class k into class i: onto the front's stack
    // when the front names i (that class holds the size, so its bit is set
    // and the bound is at or below it), else one call. `key` is i, or a value
    // that equals i or no class at all (hash_table::class_key), compared in
    // its place so that i is computed on the miss only.
    template <class H>
    [[gnu::always_inline]] static void put(H& h, std::byte* p, std::size_t n, std::size_t key, std::size_t i,
                                           std::size_t k) noexcept {
        if (put_front(h, p, n, key, k)) [[likely]]
            return;
        missed(h, n, i, k, p);
    }
    // The same where the caller keeps chunk p's stack of its size (the heap
    // keeps one per span: hash_table::span_chunks): a free that misses the
    // front pushes there when that stack has chunks already (the class then
    // holds the size: no directory bit or bound to set) and aims the front at
    // it, as put_missed would, without finding the class (Velox' malloc,
    // random sizes: most frees miss the front). An empty stack takes the
    // chunk too, with the class's directory bit and bound set (put_emptied);
    // the one a span spread over two classes keeps, never pushed to, takes
    // the miss.
    // `chunks` is the stack itself, or what finds it (a heap's sized free
    // looks up the span only on a miss).
    template <class H, class C>
    [[gnu::always_inline]] static void put(H& h, std::byte* p, std::size_t n, std::size_t key, std::size_t i,
                                           std::size_t k, const C& chunks) noexcept
        requires(!spills)
    {
        if constexpr (!std::is_invocable_v<const C&>) {
            // The caller holds the stack (its span's record, which it read
            // to check the free): a stack with chunks takes the chunk and
            // the front is aimed there, whether it named that stack already
            // or not, so the free does not branch on the front's compare,
            // which random sizes mispredict every other free. p lies in
            // that span, in a class, so its key is that class (no mask).
            chunk_list* const l = static_cast<chunk_list*>(chunks);
            if (Nested::holds_chunks(*l)) [[likely]] {
                Nested::push_chunk(*l, p, n);
                return aim(h, key, k, l);
            }
            if (put_front(h, p, n, key, k)) return;
            if (l != no_stack()) return emptied(p, h, n, key, k, l);
        } else {
            if (put_front(h, p, n, key, k)) [[likely]]
                return;
            chunk_list* const l = static_cast<chunk_list*>(stack_of(chunks));
            if (Nested::holds_chunks(*l)) [[likely]] {
                Nested::push_chunk(*l, p, n);
                return aim(h, i, opaque(k), l);
            }
            if (l != no_stack()) return emptied(p, h, n, i, k, l);
        }
        missed(h, n, i, k, p);
    }
    // What a span whose chunks lie in no single class keeps: a stack never
    // pushed to, so every free from it takes the miss.
    static chunk_list* no_stack() noexcept { return &no_chunks; }
    // The stack of class c that chunks of size class k go on (the nested
    // table's claim_chunks; nullptr: they spill). Where the nested table
    // spills, a stack it hands over from another size drops the front that
    // named it for that size; the other fronts stay, so that a request without
    // a hint still finds where its size was. Every free that may claim a stack
    // comes through here: a miss (put_new) and a range free (the table's).
    template <class H, class C>
    [[gnu::always_inline]] static chunk_list* claim(H& h, C& c, std::size_t k) noexcept {
        const auto [l, evicted] = Nested::claim_chunks(c, k);
        if constexpr (spills)
            if (evicted != npos && h.by_size.front_chunks[evicted] == l) drop(h, evicted);
        return l;
    }
    // Chunks of size class k went into class i other than by put (a range
    // free, its stack claimed first): the bound may come down to it, and i is
    // the class used last.
    template <class H>
    static void freed_run(H& h, std::size_t i, std::size_t k) noexcept {
        lower(h, i, k);
        if constexpr (frees_keep_last) h.last = i;
    }

private:
    // The search where the directory does not vouch for the size (a leaf
    // it could not map): every class from the bound up. Out of line and
    // cold: inlined into search (g++'s choice once the malloc unit may grow),
    // its walk of the classes' bitmap took registers every search saved
    // (random sizes: the Medius library 168.0 -> 166.7 instructions a step
    // without it, velox_classed_partition's heap 96.4 -> 94.8).
    template <class H>
    [[gnu::noinline, gnu::cold]] static std::byte* walk_classes(H& h, std::size_t t, std::size_t k, std::size_t n,
                                                               std::size_t last) noexcept {
        std::size_t& low = h.by_size.low[k];
        for (std::size_t i = h.classes.next(low); i != npos; i = h.classes.next(i))
            if (i != t && i != last)
                if (std::byte* p = take_at(h, i, k, n)) return low = i, p;
        low = npos;
        drop(h, k);   // no class holds the size: whatever it names is empty
        return nullptr;
    }
    template <class H>
    [[gnu::always_inline]] static void emptied(std::byte* p, H& h, std::size_t n, std::size_t i, std::size_t k,
                                               chunk_list* l) noexcept {
        if constexpr (sizes_by_class) put_emptied(p, h, by_class{}, i, k, l);
        else put_emptied(p, h, n, i, k, l);
    }
    template <class H>
    [[gnu::always_inline]] static void missed(H& h, std::size_t n, std::size_t i, std::size_t k, std::byte* p) noexcept {
        if constexpr (sizes_by_class) put_missed(h, by_class{}, i, k, p);
        else put_missed(h, n, i, k, p);
    }
    // The free's common case: p's class is its size's front.
    template <class H>
    [[gnu::always_inline]] static bool put_front(H& h, std::byte* p, std::size_t n, std::size_t key,
                                                 std::size_t k) noexcept {
        if (h.by_size.front_class[k] != key) return false;
        Nested::push_chunk(*h.by_size.front_chunks[k], p, n);
        if constexpr (frees_keep_last) h.last = key;
        return true;
    }
    // k, where g++ cannot see it is the k the hit path indexed with: else it
    // computes the miss's store address ahead of the hit's compare (one
    // instruction on every free that hits).
    [[gnu::always_inline]] static std::size_t opaque(std::size_t k) noexcept {
#if defined(__GNUC__)
        __asm__("" : "+r"(k));
#endif
        return k;
    }
    template <class C>
    [[gnu::always_inline]] static void* stack_of(const C& chunks) noexcept {
        if constexpr (std::is_invocable_r_v<void*, const C&>) return chunks();
        else return chunks;
    }
    template <class H>
    [[gnu::always_inline]] static void point(H& h, std::size_t k, std::size_t i, chunk_list* l) noexcept {
        h.by_size.front_class[k] = i;
        h.by_size.front_chunks[k] = l;
    }
    template <class H>
    [[gnu::always_inline]] static void drop(H& h, std::size_t k) noexcept {
        point(h, k, no_class, &no_chunks);
    }
    template <class H>
    static void lower(H& h, std::size_t i, std::size_t k) noexcept {
        if (std::size_t& low = h.by_size.low[k]; i < low) low = i;
    }
    // The usual miss (a free into a class that has a stack of the size)
    // calls nothing but in tail position, so it saves no registers. As one
    // function, every miss saved and restored six (Velox' malloc, random
    // sizes: 160 -> 149 instructions a step).
    template <class H, class N>
    [[gnu::noinline]] static void put_missed(H& h, N n, std::size_t i, std::size_t k, std::byte* p) noexcept {
        if (auto* c = h.classes.find(i)) [[likely]]
            if (chunk_list* l = Nested::find_chunks(*c, k)) {
                if constexpr (notes_every_miss) {
                    // Where a stack is often empty, the test of it
                    // mispredicts: every miss notes (each step a no-op where
                    // the stack had chunks), inline (as a call, Medius'
                    // random sizes cost 3 instructions a step more).
                    Nested::push_chunk(*l, p, bytes(n, k));
                    return note_holds(h, n, i, k, l);
                }
                const bool had = Nested::holds_chunks(*l);
                Nested::push_chunk(*l, p, bytes(n, k));
                if (!had) return now_holds(h, n, i, k, l);
                aim(h, i, k, l);
                return;
            }
        put_new(h, n, i, k, p);
    }
    // A free onto its span's stack l of class i, found empty: the class and
    // its stack of the size, which put_missed would find again, are in hand
    // (Velox' random sizes: the library 95.8 -> 92.7 instructions a step).
    // The class is there: a table that keeps span stacks gives up a class
    // only with all its memory (hash_table::drain keeps them, clear does not).
    // p first: the free holds it in the first argument's register, and with
    // h first every free copied it to another (Velox' pair 63 -> 64).
    template <class H, class N>
    [[gnu::noinline]] static void put_emptied(std::byte* p, H& h, N n, std::size_t i, std::size_t k,
                                              chunk_list* l) noexcept {
        Nested::push_chunk(*l, p, bytes(n, k));
        note_holds(h, n, i, k, l);
    }
    // Size class k's stack l in class i was empty and has a chunk now: the
    // class's directory bit, the bound, the front.
    template <class H, class N>
    [[gnu::noinline]] static void now_holds(H& h, N n, std::size_t i, std::size_t k, chunk_list* l) noexcept {
        note_holds(h, n, i, k, l);
    }
    template <class H, class N>
    [[gnu::always_inline]] static void note_holds(H& h, N n, std::size_t i, std::size_t k, chunk_list* l) noexcept {
        lower(h, i, k);
        aim(h, i, k, l);
        // Last, so that the directory's slow half is a tail call and this
        // saves no registers (Medius, random sizes: 13 instructions a call).
        h.sizes.note(bytes(n, k), i);
    }
    template <class H>
    [[gnu::always_inline]] static void aim(H& h, std::size_t i, std::size_t k, chunk_list* l) noexcept {
        point(h, k, i, l);
        if constexpr (frees_keep_last) h.last = i;
    }
    // A free that makes a class or a stack, or hands a size a stack, or spills.
    template <class H, class N>
    [[gnu::noinline]] static void put_new(H& h, N n_in, std::size_t i, std::size_t k, std::byte* p) noexcept {
        const std::size_t n = bytes(n_in, k);
        auto* c = h.classes.find(i);
        if (!c) [[unlikely]] c = &h.classes.obtain(i);
        chunk_list* const l = claim(h, *c, k);
        if constexpr (spills) {
            if (!l) [[unlikely]] {
                Nested::put_spilled(*c, p, n);
                h.sizes.note(n, i);
                lower(h, i, k);
                if constexpr (frees_keep_last) h.last = i;
                return;
            }
        }
        // A stack just made or claimed (noting a size the class had changes
        // nothing).
        Nested::push_chunk(*l, p, n);
        now_holds(h, n_in, i, k, l);
    }
    // A pop from class i's stack of size class k (i may be npos: no class);
    // it becomes the size's front. Else, where the nested table spills, a
    // chunk of size n from its list.
    template <class H>
    [[gnu::always_inline]] static std::byte* take_at(H& h, std::size_t i, std::size_t k, std::size_t n) noexcept {
        if (i == npos) return nullptr;
        auto* c = h.classes.find(i);
        if (!c) return nullptr;
        std::byte* p = nullptr;
        if (chunk_list* l = Nested::find_chunks(*c, k))
            if ((p = Nested::pop_chunk(*l))) point(h, k, i, l);
        if constexpr (spills)
            if (!p) p = Nested::take_spilled(*c, n);
        if (!p) return nullptr;
        return took(h, i, p);
    }
    template <class H>
    [[gnu::always_inline]] static std::byte* took(H& h, std::size_t i, std::byte* p) noexcept {
        if constexpr (keeps_last) h.last = i;
        return p;
    }
    // Class i has no chunk of size n (class k): its directory bit goes, and
    // the front with it if the front named it.
    template <class H>
    static void lacks(H& h, std::size_t n, std::size_t k, std::size_t i) noexcept {
        h.sizes.forget(n, i);
        if (h.by_size.front_class[k] == i) drop(h, k);
    }
};

} // namespace allotheque
