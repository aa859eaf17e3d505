// `page_map<H>`: the malloc-style interface — allocate(n, a) / deallocate(p) /
// usable_size(p) — over a heap that finds a block's size from its address: the
// back end's page map records every span (allotheque::heap, block_heap), so no
// block carries a header. The name stays from when this layer kept its own map;
// the map itself is now the back end's building block (backend/page_map.hpp).
//
// Alignment: any power of two the heap serves (a page for every size, up to
// H::max_large_alignment for large blocks where H has it); 0 means 16.
// Hint: with NearPrevious (the default for locality-aware heaps) every request
// carries H's last_allocation(), the paper's "near the previous allocation" for
// a caller (malloc) that cannot give one.
// Not thread-safe (H is not). Failure: allocate returns nullptr. deallocate of
// a pointer H does not hold aborts with a message (H's check).
#pragma once
#include <algorithm>
#include <cstddef>
#include <limits>
#include <utility>

#include <allotheque/detail/bits.hpp>
#include <allotheque/layers/heap_concept.hpp>
#include <allotheque/request.hpp>

namespace allotheque::layers {

template <class H, bool NearPrevious = locality_aware_of<H>>
class page_map {
    static_assert(heap<H>, "allotheque::layers::page_map<H>: H must satisfy allotheque::layers::heap");
    static_assert(has_unsized_deallocate<H> && has_usable_size<H>,
                  "allotheque::layers::page_map<H>: H must free without a size and tell a block's usable size "
                  "(deallocate(p), usable_size(p)), as heaps on the back end's page map do");

public:
    using parent_type = H;
    static constexpr std::size_t min_alignment = 16;
    static constexpr std::size_t max_size = std::numeric_limits<std::ptrdiff_t>::max() / 4;

    page_map() = default;
    template <class... Args>
    explicit page_map(std::in_place_t, Args&&... args) : parent_(std::forward<Args>(args)...) {}
    page_map(const page_map&) = delete;
    page_map& operator=(const page_map&) = delete;

    // n bytes aligned to `alignment` (0 or a power of two; 0 means 16), or nullptr.
    [[nodiscard]] void* allocate(std::size_t n, std::size_t alignment = 0) noexcept {
        if ((alignment != 0 && !detail::is_pow2(alignment)) || n > max_size) return nullptr;
        const void* hint = nullptr;
        if constexpr (NearPrevious && has_last_allocation<H>) hint = parent_.last_allocation();
        return parent_.try_allocate(request{n, hint, std::max(alignment, min_alignment)});
    }
    void deallocate(void* p) noexcept { parent_.deallocate(p); }
    std::size_t usable_size(const void* p) const noexcept { return parent_.usable_size(p); }

    H& parent() noexcept { return parent_; }
    const H& parent() const noexcept { return parent_; }

private:
    H parent_;
};

} // namespace allotheque::layers
