// A span: a run of whole pages that the back end hands to a heap, and the one
// record that describes it wherever it is. The record lives outside the span
// (record_pool), so a free span's pages can be given back to the system while
// its description stays, and a span's chunks start right at its first byte,
// keeping every chunk at its natural alignment.
//
// States:
//   free   in a range_set (a span pool's free spans, or a source's free
//          address ranges): `by_address`, `by_size` and, while its pages may
//          hold data, `by_age` link it there.
//   small  cut into chunks of `chunk` bytes for an exact-size heap; every page
//          of it maps to this record in the page map.
//   large  one block (a request above the heap's large threshold); its first
//          page maps to this record.
//   block  a region given to a splitting heap (boundary tags inside); every
//          page maps here, so "which heap owns p" works for any block.
//   region one allocation from the source: the unit given back to the source.
//   group  cut into slots of `chunk` bytes by a room layer (layers/room.hpp),
//          whose header sits at `base`; no heap takes its pointers for its own.
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>

#include <boost/intrusive/list_hook.hpp>
#include <boost/intrusive/set_hook.hpp>

namespace allotheque::backend {

namespace bi = boost::intrusive;

enum class span_state : std::uint8_t { free, small, large, block, region, group };

struct alignas(64) span {
    using set_hook = bi::set_member_hook<bi::optimize_size<true>, bi::link_mode<bi::normal_link>>;
    using list_hook = bi::list_member_hook<bi::link_mode<bi::normal_link>>;

    // What free(p) reads, first and together (one cache line).
    std::byte* base = nullptr;
    const void* owner = nullptr;   // in use: the owner tag of the heap that holds it
    std::uint64_t chunk_inverse = 0;   // small: see set_chunk
    std::uint32_t chunk = 0;   // small: the chunk size; large: the payload's offset
    span_state state = span_state::free;
    std::uint8_t chunk_shift = 0;     // small: see set_chunk
    std::uint16_t chunk_class = 0;   // small: the partition's class for `chunk`, when it has one

    // A span is in a free set or in use, never both, so what only a free span
    // needs (its two tree links) shares bytes with what only a span in use
    // needs: a record per span is then 128 bytes instead of 160, and the
    // records are most of the metadata a heap of small chunks has.
    // range_set constructs the links when a span joins it;
    // span_registry::open clears the in-use fields, whichever pool stage
    // handed the span out.
    struct in_use_fields {
        // small: how many chunks from `base` the heap has handed to its
        // partition; the chunks past them are reserved for this size, never
        // touched yet (heap.hpp, refill). Beside the fields above, in the
        // record's first cache line: free(p) refuses a chunk past them.
        // Zero in every other span a page map entry can name (large, block,
        // group), so that chunk_start() alone tells a small span's chunk from
        // anything else and free's fast path need not read `state`.
        std::size_t handed;
        // small: where the holding heap's partition puts this span's chunks,
        // when it keeps one place per span (heap.hpp, partition_span_chunks).
        void* chunks;
    };
    union {
        set_hook by_address;     // free
        in_use_fields in_use;    // in use
    };
    std::size_t bytes = 0;

    span* region = nullptr;    // the source allocation this span is part of (nullptr for a region)
    std::size_t dirty = 0;     // bytes that may hold data or be resident (0: reads as zero)
    std::uint64_t freed_at = 0;   // free: when (ms, monotonic) its newest part came back
    list_hook by_age;   // free + dirty: purge order; in use: the holder's list of spans

    struct sweep_scratch {   // a heap's reclaim sweep (heap.hpp), small spans
        std::byte* chunks;   // chunks of this span found free
        span* next;          // the next span the sweep touched
        std::uint32_t count;
    };
    union {
        set_hook by_size;         // free
        sweep_scratch sweep;     // small: all zero outside a sweep
        std::size_t request;     // large: the size asked for (usable size is `bytes`)
    };

    span() noexcept {
        std::construct_at(&by_address);
        std::construct_at(&by_size);
    }
    ~span() {}
    span(const span&) = delete;
    span& operator=(const span&) = delete;

    // Leaving a free set: the in-use fields start out clear.
    void clear_in_use() noexcept {
        in_use = {};
        sweep = {};   // and `request`
    }

    // chunk = odd * 2^chunk_shift, and chunk_inverse * odd = 1 (mod 2^64):
    // then an offset that is k chunks multiplies to k * 2^chunk_shift and
    // rotates to k, and any other offset rotates to more than 2^64 / chunk,
    // more chunks than a span has (Granlund and Montgomery's divisibility
    // test). One multiply and a rotate tell both "a chunk start" and which.
    void set_chunk(std::uint32_t c) noexcept {
        chunk = c;
        chunk_shift = static_cast<std::uint8_t>(std::countr_zero(c));
        const std::uint64_t odd = c >> chunk_shift;
        std::uint64_t inv = odd;   // correct to 3 bits; each step doubles them
        for (int i = 0; i < 5; ++i) inv *= 2 - odd * inv;
        chunk_inverse = inv;
    }
    // off / chunk if off is a multiple of chunk, else a number above any
    // chunk count.
    std::uint64_t chunk_number(std::uint64_t off) const noexcept {
        return std::rotr(off * chunk_inverse, chunk_shift);
    }
    // A free on another thread reads `handed` while the owner's refill moves it
    // up: relaxed atomic accesses (plain moves on x86), and the block being
    // freed was handed out before, so the value read covers it.
    std::size_t handed_chunks() const noexcept { return __atomic_load_n(&in_use.handed, __ATOMIC_RELAXED); }
    void set_handed(std::size_t chunks) noexcept { __atomic_store_n(&in_use.handed, chunks, __ATOMIC_RELAXED); }
    // Whether p (in this small span) lies in the chunks handed to the heap's
    // partition, rather than in the part still reserved.
    bool handed_out(const void* p) const noexcept {
        const auto off = static_cast<std::uint64_t>(static_cast<const std::byte*>(p) - base);
        return off < handed_chunks() * std::uint64_t{chunk};
    }
    // Whether p is the start of a chunk of this small span that has been
    // handed to the heap's partition (not one still reserved). p must lie in
    // the span's pages (the page map's answer for it).
    bool chunk_start(const void* p) const noexcept { return chunk_below(p, handed_chunks()); }
    // The same, asked by the heap that holds the span, the only one that
    // moves `handed`: a plain load, which the compare takes as its operand
    // (the atomic load is a move of its own: one instruction on every free
    // of the holder's own blocks).
    bool held_chunk_start(const void* p) const noexcept { return chunk_below(p, in_use.handed); }
    bool chunk_below(const void* p, std::size_t chunks) const noexcept {
        const auto off = static_cast<std::uint64_t>(static_cast<const std::byte*>(p) - base);
        return chunk_number(off) < chunks;
    }

    std::byte* end() const noexcept { return base + bytes; }
    bool contains(const void* p) const noexcept {
        auto* b = static_cast<const std::byte*>(p);
        return b >= base && b < end();
    }
};

// The record is paid once per span: keep it at two cache lines, aligned, so
// that what free(p) reads (base to bytes) is one line.
static_assert(sizeof(void*) != 8 || sizeof(span) == 128, "span: the record grew past 128 bytes");

} // namespace allotheque::backend
