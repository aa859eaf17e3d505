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
#pragma once
#include <cstddef>
#include <cstdint>

#include <boost/intrusive/list_hook.hpp>
#include <boost/intrusive/set_hook.hpp>

namespace allotheque::backend {

namespace bi = boost::intrusive;

enum class span_state : std::uint8_t { free, small, large, block, region };

struct span {
    using set_hook = bi::set_member_hook<bi::optimize_size<true>, bi::link_mode<bi::normal_link>>;
    using list_hook = bi::list_member_hook<bi::link_mode<bi::normal_link>>;

    // What free(p) reads, first and together (one cache line).
    std::byte* base = nullptr;
    const void* owner = nullptr;   // in use: the owner tag of the heap that holds it
    std::uint64_t chunk_inverse = 0;   // small: see set_chunk
    std::uint32_t chunk = 0;   // small: the chunk size; large: the payload's offset
    span_state state = span_state::free;

    std::size_t bytes = 0;
    span* region = nullptr;    // the source allocation this span is part of (nullptr for a region)
    std::size_t dirty = 0;     // free: bytes that may hold data or be resident (0: reads as zero)
    std::size_t request = 0;   // large: the size asked for (usable size is `bytes`)
    std::uint64_t freed_at = 0;   // free: when (ms, monotonic) its newest part came back

    set_hook by_address;
    set_hook by_size;
    list_hook by_age;   // free + dirty: purge order; in use: the holder's list of spans

    // Scratch for a heap's reclaim sweep (see heap.hpp): chunks of this span
    // found free, and the next span the sweep touched.
    std::byte* sweep_chunks = nullptr;
    span* sweep_next = nullptr;
    std::uint32_t sweep_count = 0;

    // chunk_inverse = ceil(2^64 / chunk), so that offset / chunk is one
    // widening multiply (exact while offset * chunk < 2^64: any span).
    void set_chunk(std::uint32_t c) noexcept {
        chunk = c;
        chunk_inverse = ~std::uint64_t{0} / c + 1;
    }
    // Whether p is the start of a chunk of this small span.
    bool chunk_start(const void* p) const noexcept {
        __extension__ using u128 = unsigned __int128;
        const auto off = static_cast<std::uint64_t>(static_cast<const std::byte*>(p) - base);
        const auto index = static_cast<std::uint64_t>((static_cast<u128>(off) * chunk_inverse) >> 64);
        return index * chunk == off;
    }

    std::byte* end() const noexcept { return base + bytes; }
    bool contains(const void* p) const noexcept {
        auto* b = static_cast<const std::byte*>(p);
        return b >= base && b < end();
    }
};

} // namespace allotheque::backend
