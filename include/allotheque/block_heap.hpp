// `block_heap<Simultaneous, Source, Options>`: the heap for partitions that
// split and coalesce (simultaneous<adjacency<...>, Index>). Every block carries
// its size in a boundary tag, so deallocation needs no size (malloc-style
// free(p) works) and a double free is caught by the tag's in-use bit.
//
// It sits on the same back end as `heap` (backend/span_pool.hpp and the page
// map): a refill takes a span (an eighth of what the heap holds, between
// min_growth and max_growth) and hands it to the partition as one free block
// (Lea's "top"), closed by an in-use fence so merges never leave it; every page
// of the span maps to it, so any block's owner is known. A request above the
// large threshold is a span of its own. Alignment above 16 is served inside the
// spans: a block with room for the alignment is split around the aligned payload.
//
// Memory goes back while running: when a free leaves a span entirely free, the
// heap keeps it as its spare if it has none and gives it to the back end
// otherwise (policy `never`: keeps every span); large blocks go back when
// freed. The back end keeps up to max(retain_bytes, recent peak / 8) free
// pages for reuse and returns the rest to the system. trim() gives everything free back.
//
// Guarantees: payloads aligned to 16 bytes (or to the requested alignment, a
// power of two up to the page size); usable_size(p) >= the requested size.
// deallocate(p) checks p against the page map before reading any tag: a
// pointer into no span of this heap, a second free (the in-use bit, or a large
// block already returned) or a tag that does not describe a block abort with a
// message instead of corrupting the heap.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <limits>
#include <new>
#include <utility>

#include <boost/intrusive/list.hpp>

#include <allotheque/backend/page_map.hpp>
#include <allotheque/backend/span_registry.hpp>
#include <allotheque/containers/adjacency.hpp>
#include <allotheque/detail/bits.hpp>
#include <allotheque/detail/fail.hpp>
#include <allotheque/detail/poison.hpp>
#include <allotheque/detail/throwing_allocate.hpp>
#include <allotheque/heap.hpp>
#include <allotheque/heap_options.hpp>
#include <allotheque/request.hpp>
#include <allotheque/sources/arena_source.hpp>
#include <allotheque/sources/source.hpp>

namespace allotheque {

template <class P>
concept block_partition = requires { requires P::manages_blocks; };

namespace detail {
// Checked in block_heap's constraint ahead of `block_partition<P>`, so that
// the first error says which heap an exact-size partition wants.
template <class P>
struct block_heap_kind {
    static_assert(block_partition<P>,
                  "allotheque::block_heap: this partition neither splits nor coalesces blocks (no "
                  "simultaneous<adjacency<...>, ...>); use allotheque::heap<Partition, Source, Options> for it");
    static constexpr bool value = true;
};
} // namespace detail

template <class P, source S = arena_source, heap_options_like Options = heap_options<>>
    requires(detail::block_heap_kind<P>::value && block_partition<P>)
class block_heap : public detail::throwing_allocate<block_heap<P, S, Options>> {
    using tags = boundary_tags;
    using span = backend::span;
    using state = backend::span_state;
    static constexpr heap_config cfg = config_of<Options>();

public:
    using partition_type = P;
    using source_type = S;
    using options = Options;
    static constexpr bool locality_aware = P::reads_address;
    static constexpr std::size_t granularity = tags::align;
    // Every block can be aligned up to a page; large blocks (and requests made
    // large by their alignment) up to max_large_alignment, inside their span.
    static constexpr std::size_t max_alignment = detail::page_size;
    static constexpr std::size_t max_large_alignment = std::size_t{1} << 30;
    static constexpr std::size_t max_size = std::numeric_limits<std::ptrdiff_t>::max() / 2;

    block_heap() requires std::default_initializable<S> { P::init(root_); }
    explicit block_heap(S s) : spans_(static_cast<S&&>(s)) { P::init(root_); }
    block_heap(const block_heap&) = delete;
    block_heap& operator=(const block_heap&) = delete;
    ~block_heap() {
        spans_.release_all();
        P::destroy(root_);
    }

    // Payload bytes a request of n bytes at alignment a really gets (0: refused).
    static constexpr std::size_t good_size(std::size_t n, std::size_t a = 0) noexcept {
        if ((a != 0 && (!detail::is_pow2(a) || a > max_large_alignment)) || n > max_size) return 0;
        if (is_large(n, a)) return large_bytes(n, a) - large_offset(a);
        return P::block_for(n) - tags::in_use_overhead;
    }

    // Where frees park blocks by size (deferred coalescing: the Lea
    // library), a block of the request's size parked by a recent free is
    // taken inline; everything else is one call. Before, the whole
    // allocation was one call and the parked block two calls deeper, each
    // saving registers and copying the request (the Lea library's malloc +
    // free: 201 instructions then, 112 now with the malloc's own changes;
    // glibc's 139).
    template <request_like R = request>
    [[nodiscard, gnu::always_inline]] inline void* try_allocate(const R& r) noexcept {
        if constexpr (parks)
            if (void* p = try_allocate_parked(r)) [[likely]]
                return p;
        return try_allocate_unparked(r);
    }
    static constexpr bool parks = requires(typename P::header_type& h) { P::take_waiting(h, std::size_t{}); };
    // That pop alone, or nullptr (nothing else tried): a caller whose miss
    // is a call of its own (the malloc's) then keeps no frame.
    template <request_like R = request>
    [[nodiscard, gnu::always_inline]] inline void* try_allocate_parked(const R& r) noexcept
        requires parks
    {
        // The size bound is for block_for, not for the lists (take_waiting
        // checks those): a size within a few bytes of SIZE_MAX wraps to a
        // small block size there, and would pop a parked block.
        if (r.alignment == 0 && r.size <= cfg.large_threshold)
            if (std::byte* p = P::take_waiting(root_, P::block_for(r.size))) [[likely]]
                return handed_out(r, p);
        return nullptr;
    }

    // Everything but that pop (which may already have been tried). Left to
    // g++: it keeps it out of line in the malloc libraries, and inlines it
    // into a caller's loop where that pays (lea_heap's batch pattern: 329
    // instructions an allocate + free, 370 as a call).
    template <request_like R>
    void* try_allocate_unparked(const R& r) noexcept {
        if ((r.alignment != 0 && (!detail::is_pow2(r.alignment) || r.alignment > max_large_alignment)) ||
            r.size > max_size)
            return nullptr;
        if (is_large(r.size, r.alignment)) return allocate_large(r);
        R q = r;
        q.size = P::block_for(r.size);
        std::byte* p = take(q);
        if (!p && P::coalesce_waiting(root_, free_block_watch())) p = take(q);
        // An aligned request takes a block with room for the alignment and a free lead.
        const std::size_t needed = r.alignment > tags::align ? P::block_for(q.size + r.alignment + P::min_block) : q.size;
        if (!p && grow(needed, r.hint)) p = take(q);
        if (!p) return nullptr;
        return handed_out(r, p);
    }

private:
    template <request_like R>
    [[gnu::always_inline]] void* handed_out(const R& r, std::byte* p) noexcept {
        if constexpr (locality_aware) last_ = p;
        if (r.zero) std::memset(p, 0, r.size);
        if constexpr (detail::poison::enabled) detail::poison::handed_out(p, r.size, payload_bytes(p), r.zero);
        return p;
    }

public:
    // Sized deallocation (the size is not needed: the tag has it).
    void deallocate(void* p, const request&) noexcept { deallocate(p); }
    void deallocate(void* p) noexcept {
        if (!p) return;
        auto* q = static_cast<std::byte*>(p);
        release(q, *checked_span(q, "deallocate(p)"));
    }
    // p's span sp already found by a caller that checked what checked_span
    // checks before the block's extent (the malloc's free: the span is this
    // heap's, a large block's start or an aligned block whose tag says in use
    // and not waiting): the extent, then the free, with no second lookup.
    void deallocate(void* p, span& sp) noexcept {
        auto* q = static_cast<std::byte*>(p);
        if (sp.state == state::block) check_extent(q, sp, tags::head(tags::block_of(q)), "deallocate(p)");
        release(q, sp);
    }

    // The span whose block p would start, any block heap's of this process,
    // from the page map's entry alone: a large block's payload, or an
    // aligned address whose tags lie in a block span; nullptr otherwise
    // (the empty span, an alias, a small span: neither state). p's tags
    // are not read: tag_in_use tells a block handed out from a free one.
    [[gnu::always_inline]] static span* block_start_span(const std::byte* p) noexcept {
        span* sp = backend::page_map::instance().find_wrapped(p - tags::payload_offset);
        if ((sp->state != state::block && sp->state != state::large) || detail::address_of(p) % tags::align != 0)
            return nullptr;
        if (sp->state == state::large) return p == sp->base + sp->chunk ? sp : nullptr;
        return sp->contains(p - tags::payload_offset) ? sp : nullptr;
    }
    // Whether block p's head tag says handed out (not free, not parked in a
    // fast bin): else a free of it is a second one.
    [[gnu::always_inline]] static bool tag_in_use(std::byte* p) noexcept {
        const std::size_t h = tags::head(tags::block_of(p));
        return (h & tags::in_use) && !(h & tags::waiting);
    }

    // The span of p, a block some block heap of this process handed out and
    // that is still out (checked when it was freed, say, and queued since):
    // the page map's entry alone, no test.
    static span& span_of_block(const void* p) noexcept {
        return *backend::page_map::instance().find_wrapped(static_cast<const std::byte*>(p) - tags::payload_offset);
    }

    // Bytes the caller may use at p (at least what it asked for).
    static std::size_t usable_size(const void* p) noexcept {
        if (!p) return 0;
        const std::byte* q = static_cast<const std::byte*>(p);
        return usable_size(q, backend::page_map::instance().find(q - tags::payload_offset));
    }
    // The same where the caller holds p's span (nullptr: none), with no
    // second lookup: the malloc's free and realloc have checked it already.
    static std::size_t usable_size(const std::byte* p, const span* sp) noexcept {
        if (sp && sp->state == state::large) return sp->bytes - sp->chunk;
        return payload_bytes(p);
    }

    // Whether p lies in a span this heap holds; the owner tag of any heap's p.
    bool owns(const void* p) const noexcept {
        const span* sp = backend::page_map::instance().find(p);
        return sp && sp->owner == owner_tag_ && (sp->state == state::block || sp->state == state::large);
    }
    static const void* owner_of(const void* p) noexcept {
        const span* sp = backend::page_map::instance().find(static_cast<const std::byte*>(p) - tags::payload_offset);
        return sp && (sp->state == state::block || sp->state == state::large) ? sp->owner : nullptr;
    }
    void set_owner_tag(const void* tag) noexcept {
        owner_tag_ = tag;
        spans_.retag(tag);
    }
    const void* owner_tag() const noexcept { return owner_tag_; }

    // Grows or shrinks the block at p in place to hold n bytes; false: it must move.
    bool try_resize(void* p, std::size_t n) noexcept {
        if (n > max_size) return false;
        auto* q = static_cast<std::byte*>(p);
        return resize_in(q, checked_span(q, "try_resize(p)"), n);
    }
    // p's span sp already found by a caller that checked it as for
    // deallocate(p, sp) (the malloc's realloc): no second lookup.
    bool try_resize(void* p, span& sp, std::size_t n) noexcept {
        if (n > max_size) return false;
        auto* q = static_cast<std::byte*>(p);
        if (sp.state == state::block) check_extent(q, sp, tags::head(tags::block_of(q)), "try_resize(p)");
        return resize_in(q, &sp, n);
    }

    // A large block moved to hold n bytes without copying it, where its span
    // is a region of its own and the source moves pages (heap::try_move_large
    // says when): the new address, or nullptr with p as it was. Aligned
    // blocks (payload further into the span) are not moved.
    [[gnu::noinline, gnu::cold]] void* try_move_large(void* p, std::size_t n) noexcept {
        if (n > max_size || !is_large(n)) return nullptr;
        span* sp = checked_span(static_cast<std::byte*>(p), "try_move_large(p)");
        if (sp->state != state::large || sp->chunk != large_offset(0)) return nullptr;
        if (!spans_.move(sp, large_bytes(n, 0))) return nullptr;
        sp->request = n;
        std::byte* const q = sp->base + sp->chunk;
        if constexpr (detail::poison::enabled) detail::poison::expose(q, n);
        return q;
    }

    // Drops every block at once and returns all memory to the source.
    void deallocate_all() noexcept {
        spans_.release_all();
        spare_ = nullptr;
        P::destroy(root_);
        P::init(root_);
        last_ = nullptr;
    }

    // Every free page back to the system, the spare span included.
    std::size_t trim() noexcept {
        const std::size_t before = spans_.pool().given_back();   // the spare may go at once
        P::coalesce_waiting(root_, free_block_watch());
        if (spare_) {
            P::take_free_block(root_, spare_->base);
            release_span(std::exchange(spare_, nullptr));
        }
        release_free_pages();
        return spans_.pool().given_back() - before;
    }
    // Every free page to the system now, without coalescing what waits.
    std::size_t release_free_pages() noexcept { return spans_.pool().trim(); }

    const void* last_allocation() const noexcept { return last_; }
    heap_stats stats() const noexcept {
        const backend::pool_stats ps = spans_.pool().stats();
        heap_stats st;
        st.os_bytes = ps.os_bytes + ps.metadata_bytes;
        st.peak_os_bytes = std::max(peak_os_, st.os_bytes);
        st.metadata_bytes = ps.metadata_bytes;
        st.large_blocks = spans_.count(state::large);
        st.large_bytes = spans_.bytes(state::large);
        st.small_span_bytes = spans_.bytes(state::block);
        st.free_bytes = ps.free_bytes;
        st.resident_free_bytes = ps.resident_free_bytes;
        st.returned_bytes = ps.returned_bytes;
        st.decommitted_bytes = ps.decommitted_bytes;
        st.reclaims = reclaims_;
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

private:
    bool resize_in(std::byte* q, span* sp, std::size_t n) noexcept {
        if (sp->state == state::large) {
            if (!is_large(n)) return false;
            if (!spans_.resize(sp, detail::round_up(sp->chunk + n, detail::page_size))) return false;
            sp->request = n;
            if constexpr (detail::poison::enabled) detail::poison::expose(q, n);
            return true;
        }
        if (is_large(n)) return false;
        // A shrink writes a free block's tags into the old tail, and the old
        // size is not known here: the whole block is opened.
        if constexpr (detail::poison::enabled) detail::poison::expose(q, payload_bytes(q));
        return P::try_extend(root_, q, P::block_for(n));
    }

    static constexpr bool is_large(std::size_t n, std::size_t a = 0) noexcept {
        return n > cfg.large_threshold || a > max_alignment;
    }
    // A large block: its payload `offset` bytes into its span (16, or the
    // alignment: at most that beyond a page), the tags' head just before it
    // flagged LARGE; the span reserves the largest offset.
    static constexpr std::size_t large_offset(std::size_t a) noexcept { return a > tags::align ? a : tags::align; }
    static constexpr std::size_t large_bytes(std::size_t n, std::size_t a) noexcept {
        return detail::round_up(large_offset(a) + std::max<std::size_t>(n, 1), detail::page_size);
    }

    // What a block in use may hold: up to the next block's head word.
    static std::size_t payload_bytes(const std::byte* p) noexcept {
        return tags::size(p - tags::payload_offset) - tags::in_use_overhead;
    }

    template <request_like R>
    std::byte* take(const R& q) noexcept {
        std::byte* p = q.alignment > tags::align ? P::allocate_aligned(root_, q, q.alignment) : P::allocate(root_, q);
        if (spare_ && p && spare_->contains(p)) spare_ = nullptr;   // the spare is in use again
        return p;
    }

    // The span of p, checked before any of p's tags is read.
    span* checked_span(std::byte* p, const char* what) noexcept {
        span* sp = block_start_span(p);
        if (!sp || sp->owner != owner_tag_)
            detail::fail("allotheque::block_heap", "a pointer this heap did not hand out", what, p);
        if (sp->state == state::large) return sp;
        if (!tag_in_use(p)) detail::fail("allotheque::block_heap", "double free (the block is already free)", what, p);
        check_extent(p, *sp, tags::head(tags::block_of(p)), what);
        return sp;
    }
    // Block p, whose head tag h says in use, lies inside sp and is followed by
    // a block that knows it.
    static void check_extent(std::byte* p, const span& sp, std::size_t h, const char* what) noexcept {
        std::byte* b = tags::block_of(p);
        const std::size_t s = h & ~tags::flags;
        const std::byte* usable_end = sp.base + sp.bytes - tags::align;   // the fence
        if ((h & tags::large) || s < P::min_block || s % tags::align != 0 || b + s > usable_end ||
            !(tags::head(b + s) & tags::prev_in_use))
            detail::fail("allotheque::block_heap", "not the start of a block (or its tags were overwritten)", what, p);
    }
    void release(std::byte* q, span& sp) noexcept {
        if (sp.state == state::large) return deallocate_large(&sp);
        // Free blocks stay open to a memory checker: splits and merges write
        // tags anywhere inside them (detail/poison.hpp). The caller vetted the tag.
        if constexpr (detail::poison::enabled) {
            const std::size_t bytes = payload_bytes(q);
            detail::poison::freed(q, bytes, bytes);
        }
        P::deallocate(root_, q, free_block_watch());
    }

    // Sees each free block a merge leaves; a span that is one free block again
    // becomes the spare, or goes back to the back end if there is a spare already.
    auto free_block_watch() noexcept {
        return [this](std::byte* b, std::size_t s) noexcept {
            if (s + tags::align < cfg.min_growth || cfg.reclaim == reclaim_policy::never) return;
            // The entry alone: the base test is exact (the empty span's is null).
            span* sp = backend::page_map::instance().find_wrapped(b);
            if (sp->base != b || sp->bytes - tags::align != s) return;
            if (!spare_) {
                spare_ = sp;
                return;
            }
            P::take_free_block(root_, b);
            release_span(sp);
        };
    }
    // sp's one free block is out of the partition already.
    void release_span(span* sp) noexcept {
        spans_.close(sp);
        ++reclaims_;
    }

    [[gnu::noinline, gnu::cold]] bool grow(std::size_t need, const void* hint) noexcept {
        const std::size_t least = detail::round_up(need + 2 * tags::align + P::min_block, detail::page_size);
        const std::size_t held = spans_.bytes(state::block);
        std::size_t want = std::clamp(detail::round_up(held / 8, detail::page_size), cfg.min_growth, cfg.max_growth);
        want = std::max(want, least);
        span* sp = spans_.open(want, hint, state::block, owner_tag_);
        if (!sp && want > least) sp = spans_.open(want = least, hint, state::block, owner_tag_);
        if (!sp) return false;
        if (!P::adopt(root_, sp->base, want)) {
            spans_.close(sp);
            return false;
        }
        note_held();
        return true;
    }

    [[gnu::noinline, gnu::cold]] void* allocate_large(const request& r) noexcept {
        const std::size_t bytes = large_bytes(r.size, r.alignment);
        if (bytes == 0 || bytes < r.size) return nullptr;
        span* sp = spans_.open_large(bytes, r.hint, owner_tag_, tags::align, large_offset(r.alignment));
        if (!sp) return nullptr;
        std::byte* payload = sp->base + sp->chunk;
        const std::size_t offset = sp->chunk;
        sp->request = r.size;
        note_held();
        tags::head(tags::block_of(payload)) = offset | tags::in_use | tags::large;
        if (r.zero && sp->dirty) std::memset(payload, 0, sp->bytes - offset);
        if constexpr (detail::poison::enabled) detail::poison::handed_out(payload, r.size, sp->bytes - offset, r.zero);
        return payload;
    }
    [[gnu::noinline, gnu::cold]] void deallocate_large(span* sp) noexcept {
        if constexpr (detail::poison::enabled) detail::poison::freed(sp->base + sp->chunk, sp->bytes - sp->chunk, 0);
        spans_.close(sp);
    }

    void note_held() noexcept {
        const backend::pool_stats ps = spans_.pool().stats();
        peak_os_ = std::max(peak_os_, ps.os_bytes + ps.metadata_bytes);
    }

    union {
        typename P::header_type root_;
    };
    backend::span_registry<S, Options> spans_{};
    span* spare_ = nullptr;   // a span that is one free block, kept against thrashing
    const void* last_ = nullptr;
    const void* owner_tag_ = this;
    std::size_t peak_os_ = 0, reclaims_ = 0;
};

} // namespace allotheque
