// `sized<H>`: a malloc-style interface over an exact-size (sized-deallocation)
// heap. Every block carries a 16-byte header just before the pointer handed
// out: the request size given to H and the distance from H's block to the
// pointer. So deallocate(p) and usable_size(p) need no size from the caller.
//
//   H's block:  [ .. padding (alignment > 16 only) .. ][request | offset][user bytes ...]
//                ^ base                                                  ^ p = base + offset
//
// Alignment up to 16 costs the header alone (offset 16); a larger alignment is
// served by asking H for n + alignment bytes at alignment 16 and placing p at
// the first suitably aligned address at least 16 bytes in, so any power of two
// works, including alignments above H::max_alignment, except over a heap that
// says what it holds (owns(p): the heaps on the back end's page map), where
// the header must lie within the first MiB of H's block (the page map records
// no more of a large block, backend/span_registry.hpp): there alignments
// above 1 MiB get nullptr.
//
// Hint: with NearPrevious (the default for locality-aware heaps) every request
// carries H's last_allocation() as its hint, the paper's implicit "near the
// previous allocation" for a caller (malloc) that cannot give one.
//
// Cost: 16 bytes per block plus H's rounding of (n + 16). Not thread-safe (H is
// not): put a lock around it. Failure: allocate returns nullptr, never throws.
// Misuse: with a heap that can say what it holds (owns(p), usable_size(p): the
// heaps on the back end's page map), deallocate and usable_size of a pointer H
// does not hold, or whose header does not describe a block of that size (a
// second free: the header is overwritten by H's free list), abort with a message.
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>
#include <new>
#include <utility>

#include <allotheque/backend/span_registry.hpp>
#include <allotheque/detail/bits.hpp>
#include <allotheque/detail/fail.hpp>
#include <allotheque/layers/heap_concept.hpp>
#include <allotheque/request.hpp>

namespace allotheque::layers {

template <class H, bool NearPrevious = locality_aware_of<H>>
class sized {
    static_assert(heap<H>, "allotheque::layers::sized<H>: H must satisfy allotheque::layers::heap");
    static_assert(H::max_alignment >= 16, "allotheque::layers::sized<H>: H must serve 16-byte alignment");

    struct header {
        std::size_t request;   // the size given to H (H rounds it the same way at deallocation)
        std::size_t offset;    // p - H's block
    };
    static header& header_of(void* p) noexcept { return *std::launder(reinterpret_cast<header*>(static_cast<std::byte*>(p) - 16)); }
    static const header& header_of(const void* p) noexcept {
        return *std::launder(reinterpret_cast<const header*>(static_cast<const std::byte*>(p) - 16));
    }

public:
    using parent_type = H;
    static constexpr std::size_t header_bytes = 16;
    static constexpr std::size_t min_alignment = 16;   // every pointer handed out
    static constexpr std::size_t max_size = std::numeric_limits<std::ptrdiff_t>::max() / 4;

    sized() = default;
    template <class... Args>
    explicit sized(std::in_place_t, Args&&... args) : parent_(std::forward<Args>(args)...) {}
    sized(const sized&) = delete;
    sized& operator=(const sized&) = delete;

    // The largest alignment served (see the top).
    static constexpr std::size_t max_alignment = has_owns<H> ? backend::large_recorded_head : max_size;

    // n bytes aligned to `alignment` (0 or a power of two; 0 means 16), or nullptr.
    [[nodiscard]] void* allocate(std::size_t n, std::size_t alignment = 0) noexcept {
        if (alignment != 0 && !detail::is_pow2(alignment)) return nullptr;
        if (alignment > max_alignment) return nullptr;
        if (n > max_size || alignment > max_size) return nullptr;
        const std::size_t offset_room = alignment > 16 ? alignment : 16;
        const std::size_t total = n + offset_room;
        const void* hint = nullptr;
        if constexpr (NearPrevious && has_last_allocation<H>) hint = parent_.last_allocation();
        auto* base = static_cast<std::byte*>(parent_.try_allocate(request{total, hint, 16}));
        if (!base) return nullptr;
        std::byte* p = base + 16;
        if (alignment > 16)
            p = reinterpret_cast<std::byte*>(detail::round_up(detail::address_of(p), alignment));
        ::new (static_cast<void*>(p - 16)) header{total, static_cast<std::size_t>(p - base)};
        return p;
    }

    void deallocate(void* p) noexcept {
        if (!p) return;
        const header h = checked_header(p, "deallocate(p)");
        parent_.deallocate(static_cast<std::byte*>(p) - h.offset, request{h.request, nullptr, 16});
    }

    // Bytes usable at p: what H really gave for the recorded request, minus the offset.
    std::size_t usable_size(const void* p) const noexcept {
        if (!p) return 0;
        const header h = checked_header(p, "usable_size(p)");
        return parent_.good_size(h.request, 16) - h.offset;
    }

    H& parent() noexcept { return parent_; }
    const H& parent() const noexcept { return parent_; }

private:
    // The header of p, checked as far as H can tell: that p lies in a block H
    // holds (before the header is read: a foreign pointer may have none), and
    // that the header describes a block H handed out with that size. A freed
    // block's header is overwritten by H's free-list link, so a second free
    // fails the size check instead of freeing garbage.
    header checked_header(const void* p, const char* what) const noexcept {
        // The header's address, not p: p may be one past a block's end (n == 0).
        if constexpr (has_owns<H>)
            if (!parent_.owns(static_cast<const std::byte*>(p) - header_bytes))
                detail::fail("allotheque::layers::sized", "a pointer this heap did not hand out", what, p);
        const header h = header_of(p);
        if (h.offset < header_bytes || h.offset > h.request || h.request > max_size + h.offset ||
            detail::address_of(p) % min_alignment != 0)
            detail::fail("allotheque::layers::sized", "double free or a corrupted block header", what, p);
        if constexpr (has_owns<H> && has_usable_size<H>) {
            const void* base = static_cast<const std::byte*>(p) - h.offset;
            const std::size_t g = parent_.good_size(h.request, 16);
            if (g == 0 || !parent_.owns(base) || parent_.usable_size(base) < g)
                detail::fail("allotheque::layers::sized", "double free or a corrupted block header", what, p);
        }
        return h;
    }

    H parent_;
};

} // namespace allotheque::layers
