// The adjacency partition: two chunks are in one class when they touch. Its
// allocation predicate is "large enough to split" (an allocation that finds a
// bigger chunk cuts it and gives the rest back); its deallocation merges a
// chunk with free neighbours. Implemented with Knuth's boundary tags, laid out
// as in Lea's allocator so a block in use costs one word:
//
//   block b:  [b+0: size of the previous block, valid only while it is free]
//             [b+8: this block's size | IN_USE | PREV_IN_USE]
//             [b+16: payload ... up to the next block's first word]
//
// The size tag doubles as an implicit size attribute (`block_size`) that any
// other partition of the same chunks can read, so a free chunk carries only the
// links of those partitions on top of the tags.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include <allotheque/attributes/attribute.hpp>
#include <allotheque/detail/bits.hpp>

namespace allotheque {

struct boundary_tags {
    static constexpr std::size_t align = 16;
    static constexpr std::size_t payload_offset = 16;
    static constexpr std::size_t in_use_overhead = 8;   // the head word; the previous-size word is lent out
    // waiting: freed, parked for deferred coalescing (still flagged in use, so
    // no neighbour merges with it; a second free sees this bit).
    static constexpr std::size_t in_use = 2, prev_in_use = 1, large = 4, waiting = 8, flags = 15;

    static std::size_t& prev_size(std::byte* b) noexcept { return *reinterpret_cast<std::size_t*>(b); }
    static std::size_t& head(std::byte* b) noexcept { return *reinterpret_cast<std::size_t*>(b + 8); }
    static std::size_t head(const std::byte* b) noexcept { return *reinterpret_cast<const std::size_t*>(b + 8); }
    static std::size_t size(const std::byte* b) noexcept { return head(b) & ~flags; }
    static bool is_in_use(const std::byte* b) noexcept { return head(b) & in_use; }
    static std::byte* block_of(void* payload) noexcept { return static_cast<std::byte*>(payload) - payload_offset; }
    static std::byte* payload_of(std::byte* b) noexcept { return b + payload_offset; }
    static std::byte* next(std::byte* b) noexcept { return b + size(b); }

    // A free block writes its size at both ends and tells its successor.
    static void mark_free(std::byte* b, std::size_t s, std::size_t prev_flag) noexcept {
        head(b) = s | prev_flag;
        prev_size(b + s) = s;
        head(b + s) &= ~prev_in_use;
    }
    static void mark_used(std::byte* b, std::size_t s, std::size_t prev_flag) noexcept {
        head(b) = s | in_use | prev_flag;
        head(b + s) |= prev_in_use;
    }
};

// `block_size`: the size read from a chunk's boundary tag (the chunk pointer a
// partition sees is the payload). Implicit: nothing is stored for it.
struct block_size {
    using value_type = std::size_t;
    static constexpr bool is_explicit = false;
    static constexpr bool is_size = true;
    static constexpr std::size_t stored_bytes = 0;
    static value_type of_chunk(const std::byte* payload, std::size_t) noexcept {
        return boundary_tags::size(payload - boundary_tags::payload_offset);
    }
    template <request_like R>
    static constexpr value_type of_request(const R& r) noexcept { return r.size; }
};

// Split when the rest is at least a minimal block (and at least MinRest bytes:
// a larger bound trades internal fragmentation for fewer tiny free blocks).
template <std::size_t MinRest = 0>
struct large_enough_to_split {
    static constexpr bool split(std::size_t have, std::size_t need, std::size_t min_block) noexcept {
        return have - need >= std::max(min_block, MinRest);
    }
};

// When a freed block merges with its neighbours: at once, or in batches (Lea's
// "fast bins"): small blocks wait, still marked in use, on per-size lists that
// serve the same size again in O(1); every `Threshold` of them the batch is
// coalesced, and always before the heap asks the system for more.
struct immediate_coalescing {
    static constexpr bool deferred = false;
};
template <std::size_t Threshold = 256, std::size_t MaxSize = 256>
struct deferred_coalescing {
    static_assert(Threshold > 0 && MaxSize % 16 == 0, "deferred_coalescing: MaxSize a multiple of 16");
    static constexpr bool deferred = true;
    static constexpr std::size_t threshold = Threshold;
    static constexpr std::size_t max_size = MaxSize;
};

template <class Split = large_enough_to_split<>, class Coalescing = immediate_coalescing>
struct adjacency {
    using tags = boundary_tags;
    using split_predicate = Split;
    using coalescing = Coalescing;
};

} // namespace allotheque
