// `simultaneous<adjacency<...>, Index>`: R_adjacency ∧ R_index. Every free chunk
// is in both partitions at once: the adjacency partition's boundary tags sit at
// offset 0, the index's links right after them, so the smallest block is the
// tags plus the index's chunk. Taking a chunk from the index takes it from the
// adjacency class too (its tags say "in use"); a merge takes the neighbours out
// of the index before the merged chunk goes back in.
//
// The index sees each free block as chunk (payload, block size) and must be able
// to remove an arbitrary chunk: an element list does, and a hash_table or an
// rb_tree of sizes over element lists (Lea's bins; the best-fit tree of sizes).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include <allotheque/containers/adjacency.hpp>
#include <allotheque/containers/class_node.hpp>
#include <allotheque/containers/partition.hpp>
#include <allotheque/detail/bits.hpp>
#include <allotheque/request.hpp>

namespace allotheque {

template <class Adjacency, partition Index>
struct simultaneous {
    static_assert(requires(typename Index::header_type& h, std::byte* p, std::size_t n) { Index::remove(h, p, n); },
                  "allotheque::simultaneous: coalescing takes free neighbours out of the index, so the index must "
                  "support remove(header, chunk, size) (an element list such as list<block_size, void>, or a "
                  "hash_table or a tree of sizes over element lists)");
    using tags = typename Adjacency::tags;
    using split = typename Adjacency::split_predicate;
    using coalescing = typename Adjacency::coalescing;

    struct waiting {   // blocks freed but not yet coalesced, one LIFO list per size
        std::byte* lists[coalescing::deferred ? coalescing::max_size / tags::align + 1 : 1] = {};
        std::size_t count = 0;
    };
    struct header_type {
        typename Index::header_type index;
        [[no_unique_address]] detail::slot<coalescing::deferred, waiting> wait{};
    };

    static constexpr bool manages_blocks = true;
    static constexpr bool reads_address = Index::reads_address;
    static constexpr std::size_t min_block = detail::round_up(tags::payload_offset + Index::min_chunk, tags::align);

    static void init(header_type& h) {
        ::new (static_cast<void*>(&h)) header_type();
        Index::init(h.index);
    }
    static void destroy(header_type& h) noexcept { Index::destroy(h.index); }

    // The block size that holds n payload bytes (the next block's first word is
    // lent to this one while it is in use).
    static constexpr std::size_t block_for(std::size_t n) noexcept {
        const std::size_t s = detail::round_up(n + tags::in_use_overhead, tags::align);
        return s == 0 ? 0 : Index::round_size(std::max(s, min_block));
    }

    // A block of at least `need` bytes, split down to `need` when the rest can
    // live on its own; nullptr when the index has nothing big enough.
    template <request_like R>
    static std::byte* allocate(header_type& h, const R& r) noexcept {
        if constexpr (coalescing::deferred)
            if (std::byte* p = take_waiting(h, r.size)) return p;
        std::byte* p = Index::allocate(h.index, r);
        if (!p) return nullptr;
        std::byte* b = tags::block_of(p);
        const std::size_t have = tags::size(b), need = r.size;
        const std::size_t prev_flag = tags::head(b) & tags::prev_in_use;
        if (split::split(have, need, min_block)) {
            std::byte* rest = b + need;
            tags::mark_free(rest, have - need, tags::prev_in_use);
            Index::deallocate(h.index, tags::payload_of(rest), have - need);
            tags::mark_used(b, need, prev_flag);
        } else {
            tags::mark_used(b, have, prev_flag);
        }
        return p;
    }

    // Deferred coalescing: a parked block of exactly `need` bytes, taken
    // back as it is (no split, no tags but its flag), else nullptr. The
    // heap's allocation tries it inline before anything else. With an
    // alignment (a power of two), only the list's top is looked at, and
    // taken if its payload has the alignment: a program that frees and asks
    // again for the same aligned size gets its block back at a pop's cost
    // instead of a split of a larger block (glibc's tcache does the same).
    static std::byte* take_waiting(header_type& h, std::size_t need, std::size_t alignment = 0) noexcept
        requires(coalescing::deferred)
    {
        if (need > coalescing::max_size) return nullptr;
        std::byte*& top = h.wait.lists[need / tags::align];
        std::byte* p = top;
        if (!p) return nullptr;
        if (alignment != 0 && (reinterpret_cast<std::uintptr_t>(p) & (alignment - 1)) != 0) return nullptr;
        top = *reinterpret_cast<std::byte**>(p);
        --h.wait.count;
        tags::head(tags::block_of(p)) &= ~tags::waiting;
        return p;
    }

    // What a merge reports: the free block it left (the heap gives a span back
    // when that block is the whole span).
    struct ignore_free_block {
        void operator()(std::byte*, std::size_t) const noexcept {}
    };

    // Returns the block of payload p to both partitions, merged with its free
    // neighbours (or, deferred, parks it until the next batch). on_free(block,
    // size) sees every free block a merge leaves.
    template <class OnFree = ignore_free_block>
    static void deallocate(header_type& h, std::byte* p, OnFree&& on_free = {}) noexcept {
        if constexpr (coalescing::deferred) {
            const std::size_t s = tags::size(tags::block_of(p));
            if (s <= coalescing::max_size) {
                std::byte*& top = h.wait.lists[s / tags::align];
                tags::head(tags::block_of(p)) |= tags::waiting;
                *reinterpret_cast<std::byte**>(p) = top;
                top = p;
                if (++h.wait.count >= coalescing::threshold) [[unlikely]]
                    return coalesce_apart(h, on_free);
                return;
            }
            return merge_apart(h, p, on_free);
        }
        merge(h, p, on_free);
    }

    // Coalesces every waiting block (deferred coalescing; a no-op otherwise).
    // The heap calls it before asking the system for memory.
    template <class OnFree = ignore_free_block>
    static bool coalesce_waiting(header_type& h, OnFree&& on_free = {}) noexcept {
        if constexpr (coalescing::deferred) {
            if (h.wait.count == 0) return false;
            for (std::byte*& top : h.wait.lists)
                while (std::byte* p = top) {
                    top = *reinterpret_cast<std::byte**>(p);
                    merge(h, p, on_free);
                }
            h.wait.count = 0;
            return true;
        } else {
            (void)h;
            (void)on_free;
            return false;
        }
    }

    // A block of at least `need` bytes whose payload is aligned to a (a power
    // of two above tags::align): a block with room for the alignment and a
    // free lead is taken, the lead before the aligned payload and the tail after
    // it go back as free blocks. nullptr when nothing fits.
    template <request_like R>
    static std::byte* allocate_aligned(header_type& h, const R& r, std::size_t a) noexcept {
        const std::size_t need = r.size;
        // As allocate: a parked block of the size first, if it has the
        // alignment. Before, each aligned request split a binned block and
        // the blocks it freed merged 256 at a time: the Lea library's
        // aligned_alloc(64, 48) + free cost 646 instructions, 223 now.
        if constexpr (coalescing::deferred)
            if (std::byte* p = take_waiting(h, need, a)) return p;
        R q = r;
        q.size = block_for(need + a + min_block);
        if (q.size == 0) return nullptr;
        std::byte* p = allocate(h, q);
        if (!p) return nullptr;
        std::byte* b = tags::block_of(p);
        const std::size_t have = tags::size(b);
        std::size_t lead = detail::round_up(detail::address_of(p), a) - detail::address_of(p);
        if (lead != 0 && lead < min_block) lead += a;
        if (lead != 0) {   // the block before b is in use: the lead needs no merge
            tags::mark_free(b, lead, tags::head(b) & tags::prev_in_use);
            Index::deallocate(h.index, tags::payload_of(b), lead);
            b += lead;
            tags::mark_used(b, have - lead, 0);
        }
        trim(h, b, need);
        return tags::payload_of(b);
    }

    // Grows (or keeps) the in-use block of payload p to `need` bytes (a
    // block_for size) in place, taking from the free block after it.
    static bool try_extend(header_type& h, std::byte* p, std::size_t need) noexcept {
        std::byte* b = tags::block_of(p);
        const std::size_t have = tags::size(b);
        if (need <= have) {
            trim(h, b, need);
            return true;
        }
        std::byte* next = b + have;
        if (tags::is_in_use(next) || have + tags::size(next) < need) return false;
        const std::size_t total = have + tags::size(next);
        // What growth leaves of the free block keeps its index entry where
        // the index can move it: a buffer that realloc grows step by step
        // eats the same free block each time. Moved before the tags are
        // written, which may lie on its links.
        if constexpr (requires { Index::relocate(h.index, next, total, next, total); }) {
            std::byte* rest = b + need;
            if (total - need >= min_block &&
                Index::relocate(h.index, tags::payload_of(next), total - have, tags::payload_of(rest), total - need)) {
                tags::head(b) = need | tags::in_use | (tags::head(b) & tags::prev_in_use);
                tags::mark_free(rest, total - need, tags::prev_in_use);
                return true;
            }
        }
        Index::remove(h.index, tags::payload_of(next), tags::size(next));
        tags::mark_used(b, total, tags::head(b) & tags::prev_in_use);
        trim(h, b, need);
        return true;
    }

    // Takes the free block at b out of the index (its span is being released).
    static void take_free_block(header_type& h, std::byte* b) noexcept {
        Index::remove(h.index, tags::payload_of(b), tags::size(b));
        tags::head(b) |= tags::in_use;
    }

    // Makes [base, base+n) one free block closed by an in-use fence, so merges
    // never leave the span. Returns false when the index cannot take it.
    static bool adopt(header_type& h, std::byte* base, std::size_t n) noexcept {
        const std::size_t s = (n - tags::align) & ~(tags::align - 1);
        if (s < min_block || !Index::prepare(h.index, base, n)) return false;
        std::byte* fence = base + s;
        tags::head(fence) = tags::align | tags::in_use;
        tags::mark_free(base, s, tags::prev_in_use);
        Index::deallocate(h.index, tags::payload_of(base), s);
        return true;
    }

private:
    // Cuts the in-use block b down to `need` bytes when the rest can live on its
    // own; the rest is freed (merged with a free block after it).
    static void trim(header_type& h, std::byte* b, std::size_t need) noexcept {
        const std::size_t have = tags::size(b);
        if (have - need < min_block) return;
        tags::mark_used(b, need, tags::head(b) & tags::prev_in_use);
        std::byte* rest = b + need;
        tags::mark_used(rest, have - need, tags::prev_in_use);
        merge(h, tags::payload_of(rest), ignore_free_block{});
    }

    // Where frees park small blocks, the merges are calls (on_free, a
    // pointer, by value), so that a parking free needs no stack frame: with
    // them inline it saved and restored four registers (the Lea library's
    // free, 12 instructions of 74).
    template <class OnFree>
    [[gnu::noinline]] static void merge_apart(header_type& h, std::byte* p, OnFree on_free) noexcept {
        merge(h, p, on_free);
    }
    template <class OnFree>
    [[gnu::noinline, gnu::cold]] static void coalesce_apart(header_type& h, OnFree on_free) noexcept {
        coalesce_waiting(h, on_free);
    }

    template <class OnFree>
    static void merge(header_type& h, std::byte* p, OnFree&& on_free) noexcept {
        std::byte* b = tags::block_of(p);
        std::size_t s = tags::size(b);
        if (!(tags::head(b) & tags::prev_in_use)) {
            std::byte* prev = b - tags::prev_size(b);
            Index::remove(h.index, tags::payload_of(prev), tags::size(prev));
            s += tags::size(prev);
            // b's head is now inside the merged free block and is not rewritten
            // below: clear its in-use bit, or a second free of b would pass the
            // heap's double-free check and merge the block twice.
            tags::head(b) &= ~tags::in_use;
            b = prev;
        }
        std::byte* next = b + s;
        if (!tags::is_in_use(next)) {
            Index::remove(h.index, tags::payload_of(next), tags::size(next));
            s += tags::size(next);
        }
        tags::mark_free(b, s, tags::prev_in_use);   // the block before a free block is always in use
        Index::deallocate(h.index, tags::payload_of(b), s);
        on_free(b, s);
    }
};

} // namespace allotheque
