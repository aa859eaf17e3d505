// `heap<Partition, Source, Options>`: the exact-size heap. It owns a
// partition's root and a back end (backend/span_pool.hpp over the source, the
// process's page map), and it is single-threaded by design: thread safety is a
// layer (locked, per_thread).
//
// allocate: round the size to the chunk size that serves it (good_size), look
// in the partition, and when nothing fits refill: take a span from the back end
// (whole pages, only chunks of this size: the page map maps each of its pages to
// it), give its chunks but the first to the partition, return the first. A span
// of chunks below a page is a reservation for its size (heap_config::
// span_reserve) whose chunks go to the partition refill_span at a time: the
// next refill of that size continues in it.
// A request above the large threshold is a span of its own (a large block).
// Deallocation is sized: the size given at allocation is rounded the same way
// and the chunk returns to every class it belongs to. deallocate(p) without a
// size, usable_size(p), owns(p) and owner_of(p) find the span in the page map.
//
// Giving memory back (Options: heap_config::reclaim, reclaim_interval_ms,
// retain_bytes, purge_delay_ms):
//   - a large block goes back to the back end when freed; the back end keeps
//     up to max(retain_bytes, recent peak / 8) free bytes for reuse (the
//     large-block cache) and gives older free pages to the system (span_pool.hpp);
//   - small spans come back when all their chunks are free, found by a sweep:
//     the partition is drained, its chunks counted per span, whole spans
//     released and the others' chunks put back. Policy `threshold` (default)
//     sweeps from a refill, at most once per reclaim interval (1 s, and at
//     least eight times the last sweep's duration after it), so the
//     allocate and free paths carry nothing for it; `eager` also counts live
//     bytes and sweeps as soon as they fall below half the small spans (and
//     releases every span when nothing is live), at a few nanoseconds per
//     call; `never` sweeps only on trim(). A refill also sweeps before the
//     heap grows by an eighth from the system (by up to a half after sweeps
//     that found many free chunks and could give none of their spans back),
//     and every heap sweeps before failing an allocation, so memory freed as
//     one size serves another.
//   - trim() sweeps and gives every free page back now.
//
// Guarantees: a block of good_size(n, a) bytes, aligned to `a` when given (a
// power of two up to the page size) and otherwise to the largest power of two
// dividing good_size (at least 8). Failure (the source refuses, the page map
// cannot record a span): allocate throws std::bad_alloc, try_allocate returns
// nullptr; the heap stays usable and leaks nothing. deallocate(p) of a pointer
// this heap did not hand out (or of one inside a block) aborts with a message.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <new>

#include <boost/intrusive/list.hpp>

#include <allotheque/backend/page_map.hpp>
#include <allotheque/backend/span_registry.hpp>
#include <allotheque/containers/partition.hpp>
#include <allotheque/detail/bits.hpp>
#include <allotheque/detail/fail.hpp>
#include <allotheque/detail/free_marks.hpp>
#include <allotheque/detail/poison.hpp>
#include <allotheque/detail/throwing_allocate.hpp>
#include <allotheque/hashes/hash_function.hpp>
#include <allotheque/heap_options.hpp>
#include <allotheque/request.hpp>
#include <allotheque/sources/arena_source.hpp>
#include <allotheque/sources/source.hpp>

namespace allotheque {

struct heap_stats {
    std::size_t os_bytes = 0;            // held from the source now (spans, free pages, span records)
    std::size_t peak_os_bytes = 0;       // high-water mark of os_bytes
    std::size_t metadata_bytes = 0;      // class tables mapped outside the source, and span records
    std::size_t large_blocks = 0;        // blocks that are spans of their own
    std::size_t large_bytes = 0;         // their spans' bytes
    std::size_t live_bytes = 0;          // in blocks handed out (chunk sizes)
    std::size_t small_span_bytes = 0;    // in spans cut into chunks
    std::size_t free_bytes = 0;          // free pages kept by the back end for reuse
    std::size_t resident_free_bytes = 0; // of which may be resident (not yet decommitted)
    std::size_t returned_bytes = 0;      // given back to the source so far
    std::size_t decommitted_bytes = 0;   // decommitted so far
    std::size_t reclaims = 0;            // sweeps that gave spans back
    std::size_t sweeps = 0;              // sweeps run (each visits every free chunk)
};

// Partitions that can hand every free chunk to a callback (drain) and forget
// them all at once (clear): what a heap needs to find fully free spans.
template <class P>
concept sweepable_partition = requires(typename P::header_type& h, void (*f)(std::byte*)) {
    P::drain(h, f);
    P::clear(h);
};

namespace detail {
// Checked in heap's constraint ahead of `partition<P>`: a splitting partition
// is no `partition` (it has no min_chunk, no round_size), so without this the
// first error named a missing member instead of the heap to use.
template <class P>
struct exact_heap_kind {
    static_assert(!requires { P::manages_blocks; },
                  "allotheque::heap: this partition splits and coalesces blocks (simultaneous<adjacency<...>, ...>); "
                  "use allotheque::block_heap<Partition, Source, Options> for it");
    static constexpr bool value = true;
};
} // namespace detail

template <class P, source S = arena_source, heap_options_like Options = heap_options<>>
    requires(detail::exact_heap_kind<P>::value && partition<P>)
class heap : public detail::throwing_allocate<heap<P, S, Options>> {
    static_assert(P::size_exact,
                  "allotheque::heap: no level of this partition finds chunks of exactly the requested size; a heap "
                  "without splitting needs a size level with match/match_only (and an exact hash), or a size "
                  "level below a non-exact one");
    static_assert(P::address_safe,
                  "allotheque::heap: an address-attribute level uses a pure match predicate; fresh memory from the "
                  "system almost never lands in the hint's class, so the search would fail after every refill (the "
                  "paper's Velox with (match, match)); use match_first, match_last_first or match_next there");

    static constexpr heap_config cfg = config_of<Options>();
    static constexpr std::size_t partition_max_chunk = [] {
        if constexpr (requires { P::max_chunk; }) return std::size_t{P::max_chunk};
        else return ~std::size_t{0};
    }();
    static_assert(cfg.large_threshold <= partition_max_chunk,
                  "allotheque::heap: the partition has no class for chunks up to the heap's large_threshold (its "
                  "hash's classes stop below it); lower heap_config::large_threshold or bound the classes higher");
    static_assert(cfg.reclaim == reclaim_policy::never || sweepable_partition<P>,
                  "allotheque::heap: reclaiming free spans needs a partition with drain(h, f) and clear(h) (every "
                  "container of the library has them); give a custom container those, or use reclaim_policy::never");
    using span = backend::span;
    using state = backend::span_state;
    static constexpr bool classifies = requires(std::size_t n) { P::classify(n); };
    // A partition that keeps each span's chunks in one place (Velox' table of
    // vicinities over size tables: hash_table::span_chunks) is told it at
    // refill, and every free of the span's chunks passes it back: a free that
    // misses its size's front is then a push there, not a class lookup.
    static constexpr bool partition_span_chunks = classifies && requires { requires P::keeps_span_chunks; };
    // The live byte count exists for the eager policy's triggers only: the
    // default policy puts nothing on the allocate and free paths.
    static constexpr bool counts_live = sweepable_partition<P> && cfg.reclaim == reclaim_policy::eager;
    // The threshold policy does not sweep heaps with less than this in small spans.
    static constexpr std::size_t reclaim_min = std::size_t{1} << 20;

public:
    using partition_type = P;
    using source_type = S;
    using options = Options;
    // Whether the partition looks at the hint at all (decides the default hint policy).
    static constexpr bool locality_aware = P::reads_address;
    // Whether last_allocation() follows the allocations (heap_config::remember_last).
    static constexpr bool remembers_last = locality_aware && cfg.remember_last;
    static constexpr std::size_t granularity = cfg.granularity;
    // With heap_config::free_marks: where a freed chunk carries its mark (past
    // every link the partition writes into a free chunk).
    using marks = detail::free_marks<detail::round_up(P::min_chunk, 8)>;
    // The smallest chunk also holds the mark when marks are on, so that the
    // switch works at any granularity: good_size, classify_small and
    // good_size_aligned all start from min_chunk, so allocate and deallocate
    // keep agreeing on the chunk size.
    static constexpr std::size_t min_chunk =
        detail::round_up(cfg.free_marks ? std::max(P::min_chunk, marks::offset + 8) : P::min_chunk, granularity);
    // Every block can be aligned up to a page; large blocks (and requests made
    // large by their alignment) up to max_large_alignment, inside their span.
    static constexpr std::size_t max_alignment = detail::page_size;
    static constexpr std::size_t max_large_alignment = std::size_t{1} << 30;
    // Larger requests are refused before any arithmetic can overflow.
    static constexpr std::size_t max_size = std::numeric_limits<std::ptrdiff_t>::max() / 2;

    heap() requires std::default_initializable<S> { P::init(root_); }
    explicit heap(S s) : spans_(static_cast<S&&>(s)) { P::init(root_); }
    // The root is constructed by P::init (which may map tables), never twice.
    heap(const heap&) = delete;
    heap& operator=(const heap&) = delete;
    ~heap() {
        spans_.release_all();
        P::destroy(root_);
    }

    // The chunk size that serves n bytes at alignment a (0: natural), or 0 when
    // the request cannot be served at all (too large, bad alignment).
    [[gnu::always_inline]] static constexpr std::size_t good_size(std::size_t n, std::size_t a = 0) noexcept {
        // The common case first, in the fewest dependent steps: it sits on every
        // allocation and deallocation. Should the class size pass the threshold,
        // it is served as a large block of that size: allocate and deallocate agree.
        if (a == 0 && n <= cfg.large_threshold) [[likely]]
            return P::round_size(std::max(detail::round_up(n, granularity), min_chunk));
        return good_size_aligned(n, a);
    }
    // Whether (good_size, alignment) is served as a span of its own.
    static constexpr bool is_large(std::size_t good, std::size_t a = 0) noexcept {
        return good > cfg.large_threshold || a > max_alignment;
    }

    // The fast paths are forced inline: a call with the request in memory
    // costs more than the work itself.
    template <request_like R = request>
    [[nodiscard, gnu::always_inline]] inline void* try_allocate(const R& r) noexcept {
        if constexpr (classifies && std::is_same_v<R, request>) {
            // Sizes in the table in line; the rest (the rule's arithmetic,
            // alignment, large blocks) out of line, with the request by value
            // in registers: a loop of small requests then keeps no registers
            // for them. With take_class's late size, segregated_heap's random
            // sizes went 39.1 -> 34.1 instructions a step (callgrind; its
            // hand-written twin: 37.0). deallocate measured better inline.
            if (r.size <= small_table_max && r.alignment == 0) [[likely]]
                return take_class(r, classify_small(r.size));
            return allocate_unclassified(r.size, r.hint, r.alignment, r.zero);
        } else if constexpr (classifies) {
            return allocate_classified(r);
        } else {
            return allocate_by_size(r);
        }
    }

    // Whether the partition keeps its allocation's fast path (a pop) apart
    // from its search (P::allocate_cached and allocate_uncached: the locality
    // heaps). try_allocate_cached is then the pop alone, and a caller's miss
    // tries try_allocate_searched before its own slow path.
    static constexpr bool searches_apart = requires(typename P::header_type& h, const request& q) {
        P::allocate_cached(h, q);
        P::allocate_uncached(h, q);
    };

    // The allocation fast path alone, for a caller with a slow path of its own
    // (the malloc): a chunk the partition already holds for a small request
    // (up to 1 KiB where the heap classifies sizes), or nullptr. It never
    // refills and never maps a large block, so it calls nothing, and a caller
    // that inlines it saves no registers around it. (Search = true is
    // try_allocate_searched.)
    template <bool Search = false, request_like R = request>
    [[nodiscard, gnu::always_inline]] inline void* try_allocate_cached(const R& r) noexcept {
        if constexpr (classifies) {
            // Classified under the alignment test: the malloc's aligned
            // requests (a run-time alignment) then load nothing for a class
            // they do not use.
            if (r.alignment == 0) [[likely]] {
                // Past the table, to the caller's slow path: the rule's
                // arithmetic needs registers that a pop does not, and inlined
                // it made every malloc save one (mimalloc's fast path stops
                // at 1 KiB as well).
                if (r.size > small_table_max) [[unlikely]]
                    return nullptr;
                const size_class c = classify_held(r.size);
                classified<R> q{r};
                q.size = c.size;
                q.class_index = c.index;
                std::byte* p = held_chunk<Search>(q);
                return p ? shown(hand_out(p, q), r, c.size) : nullptr;
            }
        }
        const std::size_t s = good_size(r.size, r.alignment);
        if (s == 0 || is_large(s, r.alignment)) return nullptr;
        R q = r;
        q.size = s;
        std::byte* p = held_chunk<Search>(q);
        return p ? shown(hand_out(p, q), r, s) : nullptr;
    }
    // What try_allocate_cached missed, from the partition's search (no refill,
    // no large block), or nullptr. For a caller's own function out of line,
    // called last (the malloc tail-calls it): the fast path then keeps no
    // frame. With the search called from inside the fast path, the Velox and
    // Medius mallocs saved two registers on every call (pair 95 -> 86
    // instructions).
    template <request_like R = request>
    [[nodiscard, gnu::always_inline]] inline void* try_allocate_searched(const R& r) noexcept
        requires searches_apart
    {
        return try_allocate_cached<true>(r);
    }

    // `r` must carry the size (and alignment) given to allocate.
    [[gnu::always_inline]] inline void deallocate(void* p, const request& r) noexcept {
        if (!p) return;
        if constexpr (classifies) {
            const size_class c = classify_small(r.size);
            if (served_small(r, c)) [[likely]] {
                if constexpr (partition_span_chunks)
                    // The span's stack, from the page map, on a front's miss only.
                    return put_chunk(p, c.size, c.index, [p] { return span_of_block(p).in_use.chunks; });
                return put_chunk(p, c.size, c.index);
            }
            deallocate_by_size(p, r);
        } else {
            deallocate_by_size(p, r);
        }
    }

    // Without a size: the page map says which span p is in, the span its size.
    void deallocate(void* p) noexcept {
        if (!p) return;
        span* sp = span_of(p, "deallocate(p)");
        deallocate(p, *sp);
    }
    // Without a size, the span already looked up (span_of_any(p) by the caller,
    // who checked it is this heap's): what the malloc replacement's free uses.
    [[gnu::always_inline]] inline void deallocate(void* p, span& sp) noexcept {
        if (sp.state == state::large) return deallocate_large(static_cast<std::byte*>(p));
        deallocate_chunk(p, sp);
    }
    // The same for a chunk of a small span (span::chunk_start(p) said so).
    [[gnu::always_inline]] inline void deallocate_chunk(void* p, span& sp) noexcept { put_back<true>(p, sp); }
    // A block whose free the caller checked before queueing it (the malloc's
    // remote frees, drained by the owner): its mark, whatever the queue left
    // there, becomes the freed mark without being tested again.
    [[gnu::always_inline]] inline void deallocate_queued(void* p, span& sp) noexcept {
        if (sp.state == state::large) return deallocate_large(static_cast<std::byte*>(p));
        put_back<false>(p, sp);
    }
    // The span holding p if p is the start of a block of any heap of this
    // process (this kind of heap's spans), nullptr otherwise.
    // Both tests are exact, so the page map's entry needs no range or alias
    // test (the empty span fails both).
    // Forced inline: realloc's first step, which g++ stopped inlining when
    // the heap's code grew elsewhere (3 instructions a realloc).
    [[gnu::always_inline]] static span* span_of_any(const void* p) noexcept {
        span* sp = span_at(p);
        if (sp->chunk_start(p)) return sp;   // only a small span has chunks handed out
        if (sp->state == state::large) return sp->base + sp->chunk == p ? sp : nullptr;
        return nullptr;
    }
    // The span of p, a block some heap of this process handed out and that is
    // still out (checked when it was freed, say, and queued since): the page
    // map's entry alone, no test.
    [[gnu::always_inline]] static span& span_of_block(const void* p) noexcept { return *span_at(p); }
    // The page map's entry for p (backend::page_map::find_wrapped): the span
    // in use there (small or large, any heap's), or the map's empty span (no
    // owner, no chunk), for any p (null and addresses past the page map
    // included), never nullptr; p itself is not tested. A free's fast path
    // asks the span whose it is, then whether p starts a chunk handed out
    // (one test tells a chunk from everything else, the empty span included,
    // so it reads no state and makes no range or null test):
    // span::held_chunk_start where the caller's heap holds it,
    // span::chunk_start anywhere else.
    [[gnu::always_inline]] static span* span_at(const void* p) noexcept {
        return backend::page_map::instance().find_wrapped(p);
    }
    // The mark of a chunk whose free must be refused (see free_marks), for a
    // caller that queues frees elsewhere: true if p already looks freed.
    static bool looks_freed(const void* p) noexcept
        requires(cfg.free_marks)
    {
        const std::uint64_t w = marks::word(const_cast<void*>(p));
        return marks::either(w, p);
    }

    // Bytes usable at p (the chunk or large block's size); 0 for nullptr.
    std::size_t usable_size(const void* p) const noexcept {
        if (!p) return 0;
        const span* sp = span_of(p, "usable_size(p)");
        return sp->state == state::large ? sp->bytes - sp->chunk : sp->chunk;
    }
    // Whether p lies in a span this heap holds.
    bool owns(const void* p) const noexcept {
        const span* sp = backend::page_map::instance().find(p);
        return sp && sp->owner == owner_tag_ && (sp->state == state::small || sp->state == state::large);
    }
    // The owner tag of the heap holding p (any heap of the process), or nullptr.
    static const void* owner_of(const void* p) noexcept {
        const span* sp = backend::page_map::instance().find(p);
        return sp && (sp->state == state::small || sp->state == state::large) ? sp->owner : nullptr;
    }
    // What owner_of reports for this heap's blocks (default: the heap's address).
    // per_thread tags each thread's heap with its slot. Re-tags spans held now.
    void set_owner_tag(const void* tag) noexcept {
        owner_tag_ = tag;
        spans_.retag(tag);
    }
    const void* owner_tag() const noexcept { return owner_tag_; }

    // Resizes a block in place: true when p (allocated with `old`) can now hold
    // n bytes without moving. Large blocks grow into free pages right after them.
    bool try_resize(void* p, const request& old, std::size_t n) noexcept {
        const std::size_t was = good_size(old.size, old.alignment), now = good_size(n, old.alignment);
        if (was == 0 || now == 0) return false;
        if (!is_large(was, old.alignment)) {
            if constexpr (detail::poison::enabled)
                if (now == was) detail::poison::resized(p, old.size, n, was);
            return now == was;
        }
        if (!is_large(now, old.alignment)) return false;
        return resize_large(span_of(p, "try_resize(p)"), p, now, old.size, n);
    }
    // Grows in place a block that is a span of its own, where the caller
    // knows its span but not its alignment (the malloc's realloc): true when
    // p now holds n bytes. A block aligned beyond max_alignment is a span of
    // its own at any size, and its size alone would name a class that may
    // have the new size's chunk size too: try_resize(p, request{size}, n)
    // then answered "fits" and left the span as it was. Growth only (n at
    // least the block's size), so a block large by its size stays large by
    // it, and a sized free names it as before.
    bool try_grow_large(void* p, std::size_t n) noexcept {
        span* sp = span_of(p, "try_grow_large(p)");
        if (sp->state != state::large || n < sp->request || n > max_size) return false;
        return resize_large(sp, p, detail::round_up(n, 16), sp->request, n);
    }

    // Moves large block p to n bytes at a new address without copying it,
    // where its span is a region of its own (max_growth or more) and the
    // source moves pages (arena_source: mremap): the new address, or nullptr
    // with p as it was. For the malloc's realloc once try_grow_large fails:
    // the old and the new block are never resident at once. Blocks whose
    // payload is offset in its span (aligned beyond a page) are not moved.
    [[gnu::noinline, gnu::cold]] void* try_move_large(void* p, std::size_t n) noexcept {
        span* sp = span_of(p, "try_move_large(p)");
        if (sp->state != state::large || sp->chunk != 0 || n < sp->request || n > max_size) return nullptr;
        const std::size_t now = detail::round_up(n, 16), old_n = sp->request;
        if (!spans_.move(sp, detail::round_up(now, detail::page_size))) return nullptr;
        sp->request = now;
        if constexpr (detail::poison::enabled) {
            detail::poison::expose(sp->base, sp->bytes);
            detail::poison::resized(sp->base, old_n, n, sp->bytes);
        }
        return sp->base;
    }

    // Gives back `count` blocks allocated with the same size (and alignment) as
    // `r` carries, in one pass over the partition: each run of consecutive
    // blocks that share a class is linked into it after a single class lookup
    // (a container's clear() frees its nodes this way). Null entries are skipped.
    void deallocate_run(void* const* ps, std::size_t count, const request& r) noexcept {
        const std::size_t s = good_size(r.size, r.alignment);
        if (s == 0) return;
        std::byte* batch[64];
        std::size_t k = 0, freed = 0;
        for (std::size_t i = 0; i < count; ++i) {
            if (!ps[i]) continue;
            if (is_large(s, r.alignment)) {
                deallocate_large(static_cast<std::byte*>(ps[i]));
                continue;
            }
            if constexpr (detail::poison::enabled) hidden(ps[i], s);
            batch[k++] = static_cast<std::byte*>(ps[i]);
            ++freed;
            if (k == std::size(batch)) {
                deallocate_run_in<P>(root_, batch, k, s);
                k = 0;
            }
        }
        if (k > 0) deallocate_run_in<P>(root_, batch, k, s);
        if (freed) released(freed * s);
    }

    // Drops every block at once and returns all memory to the source; the heap
    // stays usable. Blocks handed out before are invalid afterwards.
    void deallocate_all() noexcept {
        spans_.release_all();
        P::destroy(root_);
        P::init(root_);
        forget_reservations();
        live_ = 0;
        last_ = nullptr;
        set_floor();
    }

    // Gives every span whose chunks are all free back, and every free page to
    // the system. Returns the bytes that left the heap's resident memory.
    std::size_t trim() noexcept {
        // Spans the sweep gives back may go to the system at once (the
        // pool's budget): they count too.
        const std::size_t before = spans_.pool().given_back();
        if constexpr (sweepable_partition<P>) sweep();
        release_free_pages();
        return spans_.pool().given_back() - before;
    }
    // Every free page to the system now, without the sweep: what the spans
    // and large blocks given back hold (trim's second half, at a cost in
    // free spans rather than free chunks). Returns the bytes given back.
    std::size_t release_free_pages() noexcept { return spans_.pool().trim(); }

    // Where the last small allocation landed: the "near previous" hint
    // (nullptr where the heap does not remember it: heap_config::remember_last).
    const void* last_allocation() const noexcept { return last_; }

    heap_stats stats() const noexcept {
        const backend::pool_stats ps = spans_.pool().stats();
        heap_stats st;
        st.os_bytes = ps.os_bytes + ps.metadata_bytes;
        st.peak_os_bytes = std::max(peak_os_, st.os_bytes);
        st.metadata_bytes = ps.metadata_bytes;
        if constexpr (requires { P::metadata_bytes(root_); }) st.metadata_bytes += P::metadata_bytes(root_);
        st.large_blocks = spans_.count(state::large);
        st.large_bytes = spans_.bytes(state::large);
        st.live_bytes = live_;
        st.small_span_bytes = small_bytes();
        st.free_bytes = ps.free_bytes;
        st.resident_free_bytes = ps.resident_free_bytes;
        st.returned_bytes = ps.returned_bytes;
        st.decommitted_bytes = ps.decommitted_bytes;
        st.reclaims = reclaims_;
        st.sweeps = sweeps_;
        return st;
    }
    S& source() noexcept { return spans_.pool().source(); }
    // The back end's retention (heap_config::retain_bytes, purge_delay_ms),
    // changed at run time, where the pool stage has it (span_pool does).
    void set_retention(std::size_t retain_bytes, unsigned purge_delay_ms) noexcept
        requires requires(typename backend::span_registry<S, Options>::pool_type& pool) { pool.set_retention(0, 0u); }
    {
        spans_.pool().set_retention(retain_bytes, purge_delay_ms);
    }
    typename P::header_type& root() noexcept { return root_; }

private:
    // A request by its size alone (the rule, no table): the whole path of a
    // partition that does not classify, and the aligned or large requests of
    // one that does (out of line there).
    template <request_like R>
    [[gnu::always_inline]] inline void* allocate_by_size(const R& r) noexcept {
        const std::size_t s = good_size(r.size, r.alignment);
        if (s == 0) return nullptr;
        if (is_large(s, r.alignment)) return allocate_large(s, r.hint, r.alignment, r.zero);
        R q = r;
        q.size = s;
        return shown(take(q), r, s);
    }
    template <request_like R>
    [[gnu::always_inline]] inline void* take_class(const R& r, size_class c) noexcept {
        classified<R> q{r};
        q.size = c.size;
        q.class_index = c.index;
        std::byte* p = P::allocate(root_, q);
        // A miss classifies again, out of line: given c.size here, the
        // compiler loads it from the table on every allocation, hits too.
        if (!p) [[unlikely]] p = refill_for(r.size, r.hint);
        if (!p) return nullptr;
        return shown(hand_out(p, q), r, c.size);
    }
    [[gnu::noinline, gnu::cold]] std::byte* refill_for(std::size_t n, const void* hint) noexcept
        requires(classifies)
    {
        return refill(classify_small(n).size, hint);
    }
    // The size resolved to its class once, and the class travels down.
    template <request_like R>
    [[gnu::always_inline]] inline void* allocate_classified(const R& r) noexcept
        requires(classifies)
    {
        const size_class c = classify_small(r.size);
        if (served_small(r, c)) [[likely]]
            return take_class(r, c);
        return allocate_by_size(r);
    }
    [[gnu::noinline]] void* allocate_unclassified(std::size_t n, const void* hint, std::size_t alignment,
                                                  bool zero) noexcept
        requires(classifies)
    {
        return allocate_classified(request{n, hint, alignment, zero});
    }
    [[gnu::always_inline]] inline void deallocate_by_size(void* p, const request& r) noexcept {
        const std::size_t s = good_size(r.size, r.alignment);
        if (s == 0) return;   // no allocation can have had this size
        if (is_large(s, r.alignment)) return deallocate_large(static_cast<std::byte*>(p));
        put_chunk(p, s);
    }

    // try_allocate_cached's chunk: the partition's pop where its search is
    // apart (Search: that search), else its allocate.
    template <bool Search, request_like Q>
    [[gnu::always_inline]] std::byte* held_chunk(const Q& q) noexcept {
        if constexpr (!searches_apart) return P::allocate(root_, q);
        else if constexpr (Search) return P::allocate_uncached(root_, q);
        else return P::allocate_cached(root_, q);
    }
    // q.size is a chunk size; from the partition, or a refill when it has none.
    template <request_like R>
    [[gnu::always_inline]] inline void* take(const R& q) noexcept {
        std::byte* p = P::allocate(root_, q);
        if (!p) [[unlikely]] p = refill(q.size, q.hint);
        if (!p) return nullptr;
        return hand_out(p, q);
    }
    // What every chunk handed out gets, from the partition or a refill.
    template <request_like R>
    [[gnu::always_inline]] inline void* hand_out(std::byte* p, const R& q) noexcept {
        if constexpr (detail::poison::enabled) detail::poison::expose(p, q.size);   // a free chunk is shut
        if constexpr (remembers_last) last_ = p;
        if constexpr (cfg.free_marks) marks::word(p) = 0;
        if constexpr (counts_live) live_ += q.size;
        if (q.zero) std::memset(p, 0, q.size);
        return p;
    }
    // What a memory checker is told (detail/poison.hpp): the block r asked for
    // inside its chunk, after the heap's last write to it...
    template <request_like R>
    [[gnu::always_inline]] static void* shown(void* p, const R& r, std::size_t chunk) noexcept {
        if constexpr (detail::poison::enabled)
            if (p) detail::poison::handed_out(p, r.size, chunk, r.zero);
        return p;
    }
    // ...and a chunk coming back, before the heap's first read of it. While it
    // is free, only the words the partition and the double-free mark use stay
    // open.
    static constexpr std::size_t link_bytes = cfg.free_marks ? marks::offset + 8 : P::min_chunk;
    static void hidden(void* p, std::size_t chunk) noexcept { detail::poison::freed(p, chunk, link_bytes); }

    // The class of a small request. Sizes past the threshold are clamped, so
    // the class can be computed before the test that decides whether the request
    // is small: with no branch around it, a compiler can hoist it out of a loop
    // allocating one size, as it does for a hand-written allocator.
    [[gnu::always_inline]] static constexpr size_class classify_small(std::size_t n) noexcept
        requires(classifies)
    {
        if (n <= small_table_max) return small_class(small_table.index, n);
        return classify_rule(n);
    }
    // classify_small for n <= small_table_max, from the heap's own copy of
    // the index table: addressed from the heap pointer the fast path holds,
    // it needs no address of its own (in a shared library or a PIE, the
    // static table costs a `lea` on every malloc).
    [[gnu::always_inline]] size_class classify_held(std::size_t n) const noexcept
        requires(classifies)
    {
        return small_class(small_index_.index, n);
    }
    // The index alone from a table (the static one or the heap's copy), the
    // size from the index: a caller that does not use the size (a pop, a
    // push) loads nothing for it.
    [[gnu::always_inline]] static constexpr size_class small_class(const auto& index, std::size_t n) noexcept {
        const std::size_t step = (n + granularity - 1) / granularity;
        const std::size_t i = index[step];
        // What the tables hold, told to the optimiser: the checks after the
        // load (below the large threshold, inside the partition's classes)
        // then fold away instead of costing a compare and a branch each.
        if (i > small_table_bounds.index) __builtin_unreachable();
        const std::size_t size = small_table.size[small_sizes_by_index ? i : step];
        if (size > small_table_bounds.size) __builtin_unreachable();
        return {size, i};
    }
    static constexpr size_class classify_rule(std::size_t n) noexcept
        requires(classifies)
    {
        return P::classify(std::max(detail::round_up(std::min(n, cfg.large_threshold), granularity), min_chunk));
    }
    // The sizes most programs ask for, classified by one load instead of the
    // rule's clamps, rounding and the partition's own hash (half the
    // instructions of a variable-size allocate + free): every granularity step
    // up to 1 KiB, from classify_rule at compile time, so both always agree.
    static constexpr std::size_t small_table_max = std::min<std::size_t>(1024, cfg.large_threshold);
    static constexpr std::size_t small_steps = small_table_max / granularity + 1;
    // The classes of the table's sizes, and their largest size and index.
    static constexpr size_class small_table_bounds = [] {
        size_class b{0, 0};
        if constexpr (classifies)
            for (std::size_t i = 0; i < small_steps; ++i) {
                const size_class c = classify_rule(i * granularity);
                b.size = std::max(b.size, c.size);
                b.index = std::max(b.index, c.index);
            }
        return b;
    }();
    // Whether each class index has one chunk size (exact classes; a class
    // over a range of sizes, multiple_of's, has several): then the sizes are
    // kept by index.
    static constexpr bool small_sizes_by_index = [] {
        if constexpr (classifies) {
            std::size_t size_of[small_table_bounds.index + 1] = {};
            for (std::size_t i = 0; i < small_steps; ++i) {
                const size_class c = classify_rule(i * granularity);
                if (size_of[c.index] != 0 && size_of[c.index] != c.size) return false;
                size_of[c.index] = c.size;
            }
        }
        return true;
    }();
    // Indices as narrow as they fit (a hand-written malloc's byte table).
    using small_index_type = std::conditional_t<
        small_table_bounds.index <= 0xff, std::uint8_t,
        std::conditional_t<small_table_bounds.index <= 0xffff, std::uint16_t, std::uint32_t>>;
    struct small_table_type {
        small_index_type index[small_steps];
        std::size_t size[small_sizes_by_index ? small_table_bounds.index + 1 : small_steps];
    };
    static constexpr small_table_type small_table = [] {
        small_table_type t{};
        if constexpr (classifies)
            for (std::size_t i = 0; i < small_steps; ++i) {
                const size_class c = classify_rule(i * granularity);
                t.index[i] = static_cast<small_index_type>(c.index);
                t.size[small_sizes_by_index ? c.index : i] = c.size;
            }
        return t;
    }();
    struct small_index_copy {
        small_index_type index[small_steps];
    };
    static constexpr small_index_copy small_index_init = [] {
        small_index_copy c{};
        for (std::size_t i = 0; i < small_steps; ++i) c.index[i] = small_table.index[i];
        return c;
    }();
    // Whether r is served from class c (classify_small(r.size)): allocate and
    // deallocate must agree on it, so it is written once.
    [[gnu::always_inline]] static constexpr bool served_small(const request& r, size_class c) noexcept {
        return r.alignment == 0 && r.size <= cfg.large_threshold && c.size <= cfg.large_threshold;
    }

    // Inlined, as good_size is: g++ left them out of line in the malloc
    // libraries once their translation units grew (Velox's and Medius's
    // aligned_alloc 152 -> 180 instructions).
    [[gnu::always_inline]] static constexpr std::size_t good_size_aligned(std::size_t n, std::size_t a) noexcept {
        if (a != 0 && (!detail::is_pow2(a) || a > max_large_alignment)) return 0;
        if (n > max_size) return 0;
        if (a > max_alignment) return detail::round_up(n == 0 ? 1 : n, 16);
        const std::size_t step = std::max(a, granularity);
        std::size_t s = P::round_size(detail::round_up(std::max(n, min_chunk), step));
        if (a != 0 && detail::natural_alignment(s) < a) s = detail::round_up(s, a);
        if (s > cfg.large_threshold) return detail::round_up(n == 0 ? 1 : n, std::max<std::size_t>(a, 16));
        return s;
    }

    // Whole pages holding at least one chunk. The tail past the last chunk is
    // lost for as long as the span lives (no chunk of another size may sit
    // there): the fewest pages, up to 8 times the first try, that lose at
    // most 1/32 of the span (sub-page chunks; at 1/8, sizes of a few hundred
    // bytes lost 5 % on average, most of em3d's overhead) or 1/8 (chunks of a
    // page or more: a refill writes a link into every chunk, making its page
    // resident, so a longer span costs a program using one or two such
    // chunks more than the tail it saves); else the smallest share. Spans of
    // sub-page chunks are reservations (`reserve`), handed out a refill at
    // a time, so their first try is the reservation.
    static constexpr std::size_t span_for(std::size_t s) noexcept {
        const std::size_t first = detail::round_up(std::max(s, s < detail::page_size ? reserve : cfg.refill_span),
                                                   detail::page_size);
        const std::size_t tolerance = s < detail::page_size ? 32 : 8;
        std::size_t best = first;
        for (std::size_t t = first; t <= 8 * first; t += detail::page_size) {
            if ((t % s) * tolerance <= t) return t;
            if ((t % s) * best < (best % s) * t) best = t;
        }
        return best;
    }
    // Bytes of a span handed to the partition per refill: refill_span for
    // sub-page chunks (the rest of the span waits, untouched, for the next
    // refill of that size), the whole span otherwise.
    static constexpr std::size_t step_for(std::size_t s) noexcept {
        return s < detail::page_size ? detail::round_up(cfg.refill_span, detail::page_size) : span_for(s);
    }
    // A span of sub-page chunks is reserved for its size at this length. Its
    // 128-byte record (backend/span.hpp) is then 0.8 % of a 16 KiB span
    // rather than 3.1 % of a 4 KiB one, and since the pages past the
    // chunks handed out are never written, no page is resident before its
    // chunks are needed: a heap using a size lightly pays for what it uses.
    static constexpr std::size_t reserve = std::max(cfg.span_reserve, cfg.refill_span);

    // Per sub-page chunk size, the span whose chunks are not all handed out
    // yet. One slot per size: programs use dozens of sizes at once (em3d,
    // 70), and a slot shared by several sizes kept taking a span from one
    // to give the next a fresh one, each leaving a page of chunks behind.
    static constexpr std::size_t reserve_slots = detail::page_size / granularity;
    static constexpr std::size_t slot_of(std::size_t s) noexcept { return s / granularity % reserve_slots; }
    void forget_reservation(const span* sp) noexcept {
        span*& r = reserved_[slot_of(sp->chunk)];
        if (r == sp) r = nullptr;
    }
    void forget_reservations() noexcept {
        for (span*& r : reserved_) r = nullptr;
    }

    [[gnu::noinline, gnu::cold]] std::byte* refill(std::size_t s, const void* hint) noexcept {
        if (span* r = reserved_[slot_of(s)]; r && r->chunk == s) return hand_out(r);
        std::size_t bytes = span_for(s);
        if constexpr (sweepable_partition<P> && cfg.reclaim != reclaim_policy::never) {
            // The threshold policy's one trigger, off the fast paths: a refill
            // sweeps (giving fully free spans back, so that memory freed as one
            // size serves another) at most once per reclaim interval.
            // It also sweeps before the heap has grown by an eighth since the
            // last sweep when the new span would come from the system: a
            // program that frees 500 MiB of one size and then allocates
            // another must get those pages back, not another 500 MiB, however
            // soon after. A sweep costs a visit of each free chunk, so this
            // trigger costs at most a constant per byte the heap grows, as
            // long as the free chunks are not many more than an eighth.
            if (const std::size_t small = small_bytes(); small >= reclaim_min) {
                const std::uint64_t now = backend::now_ms();
                const bool grown = opened_since_sweep_ >= small >> growth_shift_ && !spans_.pool().can_take(bytes);
                if (grown || now - last_reclaim_ms_ >= sweep_pause_ms_) {
                    // A sweep that visited free chunks worth a sixteenth of
                    // the small spans and gave back less than that found them
                    // scattered over spans still in use (an aged heap): the
                    // next one waits for twice the growth, up to half the
                    // heap, so a fragmented heap that keeps growing does not
                    // visit every free chunk per eighth it grows (treeadd on
                    // an aged QuickFit ran 5x slower). A heap with few free
                    // chunks, or one whose sweep gave memory back, stays at
                    // the eighth.
                    std::size_t kept = 0;
                    const bool wasted = sweep(&kept) < small / 16 && kept >= small / 16;
                    growth_shift_ = wasted ? std::max(1, growth_shift_ - 1) : 3;
                    swept(now);
                }
            }
        }
        span* sp = spans_.open(bytes, hint, state::small, owner_tag_);
        if (!sp && sweep_for_memory()) sp = spans_.open(bytes, hint, state::small, owner_tag_);
        if (!sp) return nullptr;
        sp->set_chunk(static_cast<std::uint32_t>(s));
        sp->set_handed(0);
        if constexpr (classifies) sp->chunk_class = static_cast<std::uint16_t>(P::classify(s).index);
        if constexpr (partition_span_chunks && requires(const std::byte* b, std::size_t n) { P::span_room(b, n); }) {
            // A span across two of the partition's classes keeps no stack,
            // and every free from it would take the front's miss (16 KiB
            // spans cut at page offsets: a fifth of the Velox library's, 5
            // instructions a step on random sizes): its pages past the
            // class's end go back and the next span may start there. Spans
            // of sub-page chunks only, where a shorter span wastes no more
            // than a full one.
            if (const std::size_t room = P::span_room(sp->base, bytes); room < bytes && s <= detail::page_size)
                if (spans_.resize(sp, room)) bytes = sp->bytes;
        }
        // The bytes the span holds after any cut: the growth trigger above
        // compares them with the small spans' total, which counts the same.
        if constexpr (sweepable_partition<P> && cfg.reclaim != reclaim_policy::never) opened_since_sweep_ += bytes;
        if (!P::prepare(root_, sp->base, bytes)) {
            spans_.close(sp);
            return nullptr;
        }
        if constexpr (partition_span_chunks) sp->in_use.chunks = P::span_chunks(root_, sp->base, bytes, sp->chunk_class);
        note_held();
        if (step_for(s) < bytes) reserved_[slot_of(s)] = sp;
        return hand_out(sp);
    }
    // The next step_for(s) bytes' worth of sp's chunks: the first is returned,
    // the others go to the partition as one range, the lowest address on top,
    // so that consecutive allocations walk upwards. A free a chunk cost the
    // default malloc 10.5 instructions a chunk and the Velox malloc 18 (a
    // compare with the size's front, a push, the class used last each time).
    std::byte* hand_out(span* sp) noexcept {
        const std::size_t s = sp->chunk, total = sp->bytes / s;
        const std::size_t from = sp->in_use.handed;
        const std::size_t to = std::min((std::min(from * s + step_for(s), sp->bytes) + s - 1) / s, total);
        sp->set_handed(to);
        if (to == total) forget_reservation(sp);
        std::byte* const rest = sp->base + (from + 1) * s;
        const std::size_t count = to - from - 1;   // the chunks after the one returned
        if constexpr (detail::poison::enabled) {
            detail::poison::hide(rest, count * s);
            for (std::size_t k = 0; k < count; ++k) detail::poison::expose(rest + k * s, link_bytes);
        }
        deallocate_range_in<P>(root_, rest, count, s);
        return sp->base + from * s;
    }

    // Large block p (span sp, `old_n` bytes asked) resized to `now` bytes, its
    // span to the pages that hold them.
    bool resize_large(span* sp, void* p, std::size_t now, [[maybe_unused]] std::size_t old_n,
                      [[maybe_unused]] std::size_t n) noexcept {
        if (!spans_.resize(sp, detail::round_up(sp->chunk + now, detail::page_size))) return false;
        sp->request = now;
        if constexpr (detail::poison::enabled) detail::poison::resized(p, old_n, n, sp->bytes - sp->chunk);
        return true;
    }

    // A large block is a span of its own; aligned beyond a page, its payload
    // starts `chunk` bytes in and the page holding the payload maps to it.
    // (By value: a request passed by reference here would have to live in
    // memory on every caller's fast path.)
    [[gnu::noinline, gnu::cold]] void* allocate_large(std::size_t s, const void* hint, std::size_t alignment,
                                                      bool zero) noexcept {
        const std::size_t slack = alignment > detail::page_size ? alignment - detail::page_size : 0;
        const std::size_t bytes = detail::round_up(s, detail::page_size) + slack;
        if (bytes < s || bytes - slack == 0) return nullptr;
        const std::size_t align = slack ? alignment : 0;
        span* sp = spans_.open_large(bytes, hint, owner_tag_, 0, align);
        if (!sp && sweep_for_memory()) sp = spans_.open_large(bytes, hint, owner_tag_, 0, align);
        if (!sp) return nullptr;
        std::byte* payload = sp->base + sp->chunk;
        sp->request = s;
        note_held();
        if (zero && sp->dirty) std::memset(payload, 0, s);
        // The pages may have held small chunks whose free marks are still
        // there: a block handed out carries no mark, whatever the memory was.
        if constexpr (cfg.free_marks)
            if (sp->dirty) marks::word(payload) = 0;
        if constexpr (detail::poison::enabled) detail::poison::handed_out(payload, s, sp->bytes - sp->chunk, zero);
        return payload;
    }
    [[gnu::noinline, gnu::cold]] void deallocate_large(std::byte* p) noexcept {
        span* sp = backend::page_map::instance().find(p);
        if (!sp || sp->owner != owner_tag_ || sp->state != state::large || sp->base + sp->chunk != p)
            detail::fail("allotheque::heap", "free of a large block this heap does not hold (double free?)", p);
        if constexpr (detail::poison::enabled) detail::poison::freed(p, sp->bytes - sp->chunk, 0);
        spans_.close(sp);
    }

    span* span_of(const void* p, const char* what) const noexcept {
        span* sp = backend::page_map::instance().find(p);
        // In a reserved span, past the chunks handed out: never allocated.
        if (!sp || sp->owner != owner_tag_ || (sp->state != state::small && sp->state != state::large) ||
            (sp->state == state::small && !sp->handed_out(p)))
            detail::fail("allotheque::heap", "a pointer this heap did not hand out", what, p);
        if (sp->state == state::large ? static_cast<const std::byte*>(p) != sp->base + sp->chunk : !sp->chunk_start(p))
            detail::fail("allotheque::heap", "a pointer inside a block, not at its start", what, p);
        return sp;
    }

    template <bool TestMark>
    [[gnu::always_inline]] inline void put_back(void* p, span& sp) noexcept {
        if constexpr (partition_span_chunks) put_chunk<TestMark>(p, sp.chunk, sp.chunk_class, sp.in_use.chunks);
        else if constexpr (classifies) put_chunk<TestMark>(p, sp.chunk, sp.chunk_class);
        else put_chunk<TestMark>(p, sp.chunk);
    }
    // Every free of a small chunk ends here: the chunk size, and its class
    // when the caller knows it (else the partition finds it). TestMark false:
    // the caller checked the double-free mark already.
    // (By reference: span::chunks is read on a front's miss only.)
    template <bool TestMark = true, class... Index>
    [[gnu::always_inline]] inline void put_chunk(void* p, std::size_t size, const Index&... index) noexcept {
        if constexpr (detail::poison::enabled) hidden(p, size);
        if constexpr (cfg.free_marks) {
            if constexpr (TestMark) mark_freed(p);
            else marks::word(p) = marks::local(p);
        }
        P::deallocate(root_, static_cast<std::byte*>(p), size, index...);
        released(size);
    }

    void mark_freed(void* p) noexcept {
        std::uint64_t& w = marks::word(p);
        // Either mark: a block waiting on a remote list (the malloc's) is freed already too.
        if (marks::either(w, p)) detail::fail("allotheque::heap", "double free", "deallocate", p);
        w = marks::local(p);
    }

    // Bookkeeping after s bytes came back; the one test on the free path
    // (none at all with reclaim_policy::never).
    void released([[maybe_unused]] std::size_t s) noexcept {
        if constexpr (counts_live) {
            live_ -= s;
            if (live_ < reclaim_floor_) [[unlikely]]
                reclaim();
        }
    }
    static constexpr unsigned ratio = 2;   // eager: sweep when half the small spans are free
    std::size_t small_bytes() const noexcept { return spans_.bytes(state::small); }
    void note_held() noexcept {
        const backend::pool_stats ps = spans_.pool().stats();
        peak_os_ = std::max(peak_os_, ps.os_bytes + ps.metadata_bytes);
        if (live_ >= small_bytes() / ratio) sweep_guard_ = max_size;   // healthy again: no back-off
        set_floor();
    }
    // The eager policy sweeps when live bytes fall below 1/ratio of the small
    // spans. After a sweep the floor is also at most half the live bytes
    // it left (sweep_guard_), so an unproductive sweep is not repeated until
    // that many more bytes have come back.
    void set_floor() noexcept { reclaim_floor_ = std::min(small_bytes() / ratio, sweep_guard_); }

    [[gnu::noinline, gnu::cold]] void reclaim() noexcept {
        const std::uint64_t now = backend::now_ms();
        // Releasing everything visits no chunk: only the interval holds it
        // back (a heap that empties and fills again in cycles keeps its
        // spans); a sweep also waits out eight times the last one's length.
        if (now - last_reclaim_ms_ < (live_ == 0 ? std::uint64_t{cfg.reclaim_interval_ms} : sweep_pause_ms_)) {
            // Too soon after the last one: wait until the live bytes halve again.
            sweep_guard_ = live_ / 2;
            set_floor();
            return;
        }
        if (live_ == 0) {
            // Nothing is live: every span goes, without looking at a chunk.
            release_small_spans();
            P::clear(root_);
            ++reclaims_;
            sweep_guard_ = max_size;
        } else {
            sweep();
            sweep_guard_ = live_ / 2;
        }
        swept(now);
        set_floor();
    }
    // An automatic sweep that began at `started` (ms) has ended: the next
    // one on the clock waits the reclaim interval from now, and at least
    // eight times what this one took, so that the clock's sweeps take at
    // most a ninth of the time whatever the number of free chunks. Stamped
    // before the sweep, with the interval alone, a fragmented heap whose
    // sweep outlasted the interval swept again on every refill: 160 million
    // free 16-byte chunks pinning their pages, a sweep of 1.7 s per refill,
    // a program of seconds under glibc stalled for minutes.
    void swept(std::uint64_t started) noexcept {
        const std::uint64_t now = backend::now_ms();
        last_reclaim_ms_ = now;
        sweep_pause_ms_ = std::max<std::uint64_t>(cfg.reclaim_interval_ms, 8 * (now - started));
    }
    // Before failing an allocation: sweep if anything is free at all, and
    // give the pool's free pages to the source, whose address space a new
    // reservation may need (under a tight `ulimit -v` every reserved byte
    // counts, used or not).
    bool sweep_for_memory() noexcept {
        bool swept = false;
        if constexpr (sweepable_partition<P>) swept = sweep() > 0;
        return spans_.pool().trim() > 0 || swept;
    }

    // Drains the partition, counts its chunks per span, releases the spans whose
    // chunks are all free and puts the other chunks back. Returns bytes
    // released; *kept (if given) receives the bytes of the chunks put back.
    std::size_t sweep(std::size_t* kept = nullptr) noexcept {
        ++sweeps_;
        span* touched = nullptr;
        span* last = nullptr;
        auto& map = backend::page_map::instance();
        P::drain(root_, [&](std::byte* p) noexcept {
            span* sp = last && last->contains(p) ? last : map.find(p);
            last = sp;
            if (sp->sweep.count++ == 0) {
                sp->sweep.next = touched;
                touched = sp;
            }
            *reinterpret_cast<std::byte**>(p) = sp->sweep.chunks;
            sp->sweep.chunks = p;
        });
        if constexpr (locality_aware) last_ = nullptr;
        std::size_t released_bytes = 0;
        opened_since_sweep_ = 0;
        for (span* sp = touched; sp;) {
            span* next = sp->sweep.next;
            const std::size_t s = sp->chunk;
            std::byte* c = sp->sweep.chunks;
            if (sp->sweep.count == sp->in_use.handed) {
                released_bytes += sp->bytes;
                forget_reservation(sp);
                spans_.close(sp);
            } else {
                if (kept) *kept += sp->sweep.count * s;
                std::byte* batch[64];
                std::size_t k = 0;
                while (c) {
                    std::byte* n = *reinterpret_cast<std::byte**>(c);
                    batch[k++] = c;
                    c = n;
                    if (k == std::size(batch) || !c) {
                        deallocate_run_in<P>(root_, batch, k, s);
                        k = 0;
                    }
                }
                sp->sweep = {};
            }
            sp = next;
        }
        if (released_bytes) ++reclaims_;
        return released_bytes;
    }
    // Every small span back to the pool (nothing in them is live).
    void release_small_spans() noexcept {
        span* all = nullptr;
        spans_.for_each([&](span& sp) {
            if (sp.state == state::small) {
                sp.sweep.next = all;
                all = &sp;
            }
        });
        while (all) {
            span* next = all->sweep.next;
            spans_.close(all);
            all = next;
        }
        forget_reservations();
        last_ = nullptr;
    }

    union {   // constructed and destroyed by P::init / P::destroy only
        typename P::header_type root_;
    };
    // Right after the partition's lists, which the same fast path reads.
    small_index_copy small_index_ = small_index_init;
    backend::span_registry<S, Options> spans_{};
    const void* last_ = nullptr;
    const void* owner_tag_ = this;
    std::size_t live_ = 0, reclaim_floor_ = 0, peak_os_ = 0, reclaims_ = 0, sweeps_ = 0;
    std::size_t sweep_guard_ = max_size;
    std::size_t opened_since_sweep_ = 0;   // bytes of small spans opened since the last sweep
    int growth_shift_ = 3;                  // a refill sweeps once the heap grew by small_bytes() >> this
    std::uint64_t last_reclaim_ms_ = backend::now_ms();
    std::uint64_t sweep_pause_ms_ = cfg.reclaim_interval_ms;   // the clock's wait after last_reclaim_ms_ (swept)
    span* reserved_[reserve_slots] = {};   // last: the fields above are read on the fast paths
};

} // namespace allotheque
