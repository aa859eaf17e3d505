// `page_map<H>`: a malloc-style interface (allocate(n, a) / deallocate(p) /
// usable_size(p)) over an exact-size heap, with no per-block header. The size a
// block was served with is found from its address: a two-level radix table maps
// each 4 KiB page to the chunk size of the span that page belongs to.
//
// This needs every page to hold chunks of one size only, which `heap` guarantees
// when its options set page_spans (heap_options<..., PageSpans = true>): refill
// spans are page-aligned, whole pages, and no leftover tail of another size is
// kept. The heap reports each span it cuts through its span observer; large
// blocks (straight from the source, page-aligned) are recorded here, on their
// first page. Alignments up to H::max_alignment (a page) are H's natural chunk
// alignment; a larger one gets a large block with a 16-byte header before the
// pointer, and its page entry says "look at the header".
//
// Table: 48-bit addresses, 36-bit page numbers split 18 / 18. The root (2 MiB)
// and each leaf (2 MiB, covering 1 GiB of addresses) are mapped lazily
// (MAP_NORESERVE): resident cost is one 8-byte entry per page of heap in use,
// i.e. 0.2 % of the heap, plus the touched pages of the root.
//
// Hint: as sized<H>, H's last_allocation() by default for locality-aware heaps.
// Not thread-safe (H is not). Failure: allocate returns nullptr. deallocate of
// a pointer whose page this map never recorded aborts with a message.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <new>
#include <utility>

#include <allotheque/detail/bits.hpp>
#include <allotheque/heap_options.hpp>
#include <allotheque/layers/heap_concept.hpp>
#include <allotheque/request.hpp>

namespace allotheque::layers {

template <class H, bool NearPrevious = locality_aware_of<H>>
class page_map {
    static_assert(heap<H>, "allotheque::layers::page_map<H>: H must satisfy allotheque::layers::heap");
    static_assert(requires { typename H::options; } && page_spans_of<typename H::options>,
                  "allotheque::layers::page_map<H>: H must be a heap whose options set page_spans "
                  "(heap_options<Span, Large, MinGrowth, MaxGrowth, true>), so every page holds one chunk size");
    static_assert(requires(H& h) { h.set_span_observer(nullptr, nullptr); },
                  "allotheque::layers::page_map<H>: H must report its refill spans (set_span_observer)");

    using entry = std::uint64_t;
    static constexpr unsigned address_bits = 48;
    static constexpr unsigned page_bits = 12;
    static constexpr unsigned leaf_bits = 18;
    static constexpr unsigned root_bits = address_bits - page_bits - leaf_bits;
    static constexpr std::size_t root_count = std::size_t{1} << root_bits;
    static constexpr std::size_t leaf_count = std::size_t{1} << leaf_bits;
    static constexpr entry headered = 1;   // sizes are multiples of 8: bit 0 is free
    static_assert(detail::page_size == std::size_t{1} << page_bits);

    struct header {
        std::size_t request;
        std::size_t offset;
    };

public:
    using parent_type = H;
    static constexpr std::size_t min_alignment = 16;
    static constexpr std::size_t max_size = std::numeric_limits<std::ptrdiff_t>::max() / 4;
    static constexpr std::size_t leaf_bytes = leaf_count * sizeof(entry);
    static constexpr std::size_t root_bytes = root_count * sizeof(entry*);

    page_map() noexcept { init(); }
    template <class... Args>
    explicit page_map(std::in_place_t, Args&&... args) : parent_(std::forward<Args>(args)...) {
        init();
    }
    page_map(const page_map&) = delete;
    page_map& operator=(const page_map&) = delete;
    ~page_map() {
        parent_.set_span_observer(nullptr, nullptr);
        if (!root_) return;
        for (std::size_t i = 0; i < root_count && leaves_ > 0; ++i)
            if (root_[i]) {
                ::munmap(root_[i], leaf_bytes);
                --leaves_;
            }
        ::munmap(root_, root_bytes);
    }

    // n bytes aligned to `alignment` (0 or a power of two; 0 means 16), or nullptr.
    [[nodiscard]] void* allocate(std::size_t n, std::size_t alignment = 0) noexcept {
        if (!root_ || (alignment != 0 && !detail::is_pow2(alignment)) || n > max_size || alignment > max_size)
            return nullptr;
        const void* hint = nullptr;
        if constexpr (NearPrevious && has_last_allocation<H>) hint = parent_.last_allocation();
        const std::size_t a = std::max(alignment, min_alignment);
        if (a > H::max_alignment) return allocate_overaligned(n, a, hint);

        const std::size_t s = parent_.good_size(n, a);
        if (s == 0) return nullptr;
        void* p = parent_.try_allocate(request{n, hint, a});
        if (!p) return nullptr;
        entry* e = slot(p, H::is_large(s));
        if (!e) {   // the leaf could not be mapped
            parent_.deallocate(p, request{n, hint, a});
            return nullptr;
        }
        if (H::is_large(s)) *e = s;   // small chunks: the span observer wrote it
        return p;
    }

    void deallocate(void* p) noexcept {
        if (!p) return;
        const entry e = lookup(p);
        if (e == headered) {
            const header& h = header_of(p);
            return parent_.deallocate(static_cast<std::byte*>(p) - h.offset, request{h.request, nullptr, 16});
        }
        if (e == 0) fail("free of a pointer in a page this heap never used");
        parent_.deallocate(p, request{static_cast<std::size_t>(e), nullptr, 0});
    }

    std::size_t usable_size(const void* p) const noexcept {
        if (!p) return 0;
        const entry e = lookup(p);
        if (e == headered) {
            const header& h = header_of(p);
            return parent_.good_size(h.request, 16) - h.offset;
        }
        return static_cast<std::size_t>(e);
    }

    H& parent() noexcept { return parent_; }
    const H& parent() const noexcept { return parent_; }

    // Resident bytes of the table (root and leaves), from mincore: its real cost.
    std::size_t metadata_resident_bytes() const noexcept {
        if (!root_) return 0;
        std::size_t total = resident(root_, root_bytes);
        for (std::size_t i = 0, seen = 0; i < root_count && seen < leaves_; ++i)
            if (root_[i]) {
                ++seen;
                total += resident(root_[i], leaf_bytes);
            }
        return total;
    }
    std::size_t leaves() const noexcept { return leaves_; }

private:
    void init() noexcept {
        void* r = ::mmap(nullptr, root_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        root_ = r == MAP_FAILED ? nullptr : static_cast<entry**>(r);
        parent_.set_span_observer(&observe, this);
    }

    static std::uintptr_t page_of(const void* p) noexcept { return detail::address_of(p) >> page_bits; }

    // The entry for p's page; with `create`, maps its leaf when missing (nullptr if that fails).
    entry* slot(const void* p, bool create) noexcept {
        const std::uintptr_t pg = page_of(p);
        if (pg >> (root_bits + leaf_bits)) return nullptr;
        entry*& leaf = root_[pg >> leaf_bits];
        if (!leaf) {
            if (!create) return nullptr;
            void* m = ::mmap(nullptr, leaf_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                             -1, 0);
            if (m == MAP_FAILED) return nullptr;
            leaf = static_cast<entry*>(m);
            ++leaves_;
        }
        return &leaf[pg & (leaf_count - 1)];
    }
    entry lookup(const void* p) const noexcept {
        const std::uintptr_t pg = page_of(p);
        if (pg >> (root_bits + leaf_bits)) return 0;
        const entry* leaf = root_[pg >> leaf_bits];
        return leaf ? leaf[pg & (leaf_count - 1)] : 0;
    }

    // Called by H for every range it cuts into chunks of one size.
    static void observe(void* self, std::byte* first, std::size_t bytes, std::size_t chunk) noexcept {
        auto& m = *static_cast<page_map*>(self);
        if (!m.root_ || bytes == 0) return;
        for (std::uintptr_t pg = page_of(first), last = page_of(first + bytes - 1); pg <= last; ++pg) {
            entry* e = m.slot(reinterpret_cast<const void*>(pg << page_bits), true);
            if (!e) {   // chunks of this page cannot be freed by address: keep them out of use
                m.broken_ = true;
                continue;
            }
            *e = chunk;
        }
    }

    // Alignment above a page: a large block, the pointer at the first aligned
    // address 16 bytes in, a header before it, and the page flagged.
    void* allocate_overaligned(std::size_t n, std::size_t a, const void* hint) noexcept {
        const std::size_t total = std::max(n + a, H::options::large_threshold + 1);
        auto* base = static_cast<std::byte*>(parent_.try_allocate(request{total, hint, 16}));
        if (!base) return nullptr;
        auto* p = reinterpret_cast<std::byte*>(detail::round_up(detail::address_of(base) + 16, a));
        entry* e = slot(p, true);
        if (!e) {
            parent_.deallocate(base, request{total, nullptr, 16});
            return nullptr;
        }
        ::new (static_cast<void*>(p - 16)) header{total, static_cast<std::size_t>(p - base)};
        *e = headered;
        return p;
    }
    static const header& header_of(const void* p) noexcept {
        return *std::launder(reinterpret_cast<const header*>(static_cast<const std::byte*>(p) - 16));
    }

    static std::size_t resident(const void* p, std::size_t bytes) noexcept {
        unsigned char vec[512];
        std::size_t n = 0;
        const std::size_t pages = bytes / detail::page_size;
        for (std::size_t off = 0; off < pages; off += sizeof vec) {
            const std::size_t k = std::min(sizeof vec, pages - off);
            if (::mincore(const_cast<void*>(static_cast<const void*>(static_cast<const std::byte*>(p) +
                                                                     off * detail::page_size)),
                          k * detail::page_size, vec) != 0)
                return 0;
            for (std::size_t i = 0; i < k; ++i) n += vec[i] & 1;
        }
        return n * detail::page_size;
    }

    [[noreturn]] static void fail(const char* what) noexcept {
        static const char prefix[] = "allotheque::layers::page_map: ";
        [[maybe_unused]] auto r1 = ::write(2, prefix, sizeof prefix - 1);
        std::size_t len = 0;
        while (what[len]) ++len;
        [[maybe_unused]] auto r2 = ::write(2, what, len);
        [[maybe_unused]] auto r3 = ::write(2, "\n", 1);
        std::abort();
    }

    entry** root_ = nullptr;
    std::size_t leaves_ = 0;
    bool broken_ = false;
    H parent_;
};

} // namespace allotheque::layers
