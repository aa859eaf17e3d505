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
// works, including alignments above H::max_alignment.
//
// Hint: with NearPrevious (the default for locality-aware heaps) every request
// carries H's last_allocation() as its hint, the paper's implicit "near the
// previous allocation" for a caller (malloc) that cannot give one.
//
// Cost: 16 bytes per block plus H's rounding of (n + 16). Not thread-safe (H is
// not): put a lock around it. Failure: allocate returns nullptr, never throws.
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>
#include <new>
#include <utility>

#include <allotheque/detail/bits.hpp>
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

    // n bytes aligned to `alignment` (0 or a power of two; 0 means 16), or nullptr.
    [[nodiscard]] void* allocate(std::size_t n, std::size_t alignment = 0) noexcept {
        if (alignment != 0 && !detail::is_pow2(alignment)) return nullptr;
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
        const header h = header_of(p);
        parent_.deallocate(static_cast<std::byte*>(p) - h.offset, request{h.request, nullptr, 16});
    }

    // Bytes usable at p: what H really gave for the recorded request, minus the offset.
    std::size_t usable_size(const void* p) const noexcept {
        if (!p) return 0;
        const header& h = header_of(p);
        return parent_.good_size(h.request, 16) - h.offset;
    }

    H& parent() noexcept { return parent_; }
    const H& parent() const noexcept { return parent_; }

private:
    H parent_;
};

} // namespace allotheque::layers
