// `simultaneous<adjacency<...>, Index>`: R_adjacency ∧ R_index. Every free chunk
// is in both partitions at once: the adjacency partition's boundary tags sit at
// offset 0, the index's links right after them, so the smallest block is the
// tags plus the index's chunk. Taking a chunk from the index takes it from the
// adjacency class too (its tags say "in use"); a merge takes the neighbours out
// of the index before the merged chunk goes back in.
//
// The index sees each free block as chunk (payload, block size) and must be able
// to remove an arbitrary chunk: a hash_table over element lists does.
#pragma once
#include <algorithm>
#include <cstddef>

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
                  "support remove(header, chunk, size) (a hash_table over element lists, e.g. list<block_size, void>)");
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
        if constexpr (coalescing::deferred) {
            if (r.size <= coalescing::max_size) {
                std::byte*& top = h.wait.lists[r.size / tags::align];
                if (std::byte* p = top) {
                    top = *reinterpret_cast<std::byte**>(p);
                    --h.wait.count;
                    return p;
                }
            }
        }
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

    // Returns the block of payload p to both partitions, merged with its free
    // neighbours (or, deferred, parks it until the next batch).
    static void deallocate(header_type& h, std::byte* p) noexcept {
        if constexpr (coalescing::deferred) {
            const std::size_t s = tags::size(tags::block_of(p));
            if (s <= coalescing::max_size) {
                std::byte*& top = h.wait.lists[s / tags::align];
                *reinterpret_cast<std::byte**>(p) = top;
                top = p;
                if (++h.wait.count >= coalescing::threshold) coalesce_waiting(h);
                return;
            }
        }
        merge(h, p);
    }

    // Coalesces every waiting block (deferred coalescing; a no-op otherwise).
    // The heap calls it before asking the system for memory.
    static bool coalesce_waiting(header_type& h) noexcept {
        if constexpr (coalescing::deferred) {
            if (h.wait.count == 0) return false;
            for (std::byte*& top : h.wait.lists)
                while (std::byte* p = top) {
                    top = *reinterpret_cast<std::byte**>(p);
                    merge(h, p);
                }
            h.wait.count = 0;
            return true;
        } else {
            return false;
        }
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
    static void merge(header_type& h, std::byte* p) noexcept {
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
    }
};

} // namespace allotheque
