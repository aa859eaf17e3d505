// The page map: for each 4 KiB page of the address space, the span that holds
// it (or nothing). One map per process, shared by every heap, because "which
// heap owns p" must be answerable by any thread for any pointer (remote frees,
// malloc's free(p), usable_size(p) without a size).
//
// Layout: 48-bit addresses, 36-bit page numbers split 18 / 18. The root (2 MiB
// of pointers) and each leaf (2 MiB, covering 1 GiB of addresses) are mapped
// lazily with MAP_NORESERVE, so the resident cost is one 8-byte entry per page
// of heap in use (0.2 %) plus the touched root pages.
//
// Threads: a span's pages are written by the heap that holds the span and read
// by anyone; entries are atomic (relaxed stores; a reader that may see a span
// a moment after its creation acquires it through whatever handed it the
// pointer). A leaf is installed with one compare-and-swap; the loser unmaps its copy.
// Failure: set() returns false when a leaf cannot be mapped and leaves no
// entry of that call behind, so the caller can refuse the span cleanly.
#pragma once
#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include <allotheque/backend/span.hpp>
#include <allotheque/detail/bits.hpp>

namespace allotheque::backend {

class page_map {
    static constexpr unsigned address_bits = 48;
    static constexpr unsigned page_bits = 12;
    static constexpr unsigned leaf_bits = 18;
    static constexpr unsigned root_bits = address_bits - page_bits - leaf_bits;
    static constexpr std::size_t root_count = std::size_t{1} << root_bits;
    static constexpr std::size_t leaf_count = std::size_t{1} << leaf_bits;
    static_assert(detail::page_size == std::size_t{1} << page_bits);

    using leaf = span**;   // an array of leaf_count entries
    using root = leaf*;    // an array of root_count leaves

public:
    static constexpr std::size_t leaf_bytes = leaf_count * sizeof(span*);
    static constexpr std::size_t root_bytes = root_count * sizeof(leaf*);
    static constexpr std::uintptr_t max_address = std::uintptr_t{1} << address_bits;

    constexpr page_map() noexcept = default;
    page_map(const page_map&) = delete;
    page_map& operator=(const page_map&) = delete;

    // The process's map. Constant-initialised and never destroyed: blocks may
    // be freed during exit, after every static destructor has run.
    static page_map& instance() noexcept {
        static constinit page_map m;
        return m;
    }

    // The span holding p's page, or nullptr.
    span* find(const void* p) const noexcept {
        const std::uintptr_t pg = detail::address_of(p) >> page_bits;
        root r = root_.load(std::memory_order_acquire);
        if (!r || (pg >> (root_bits + leaf_bits)) != 0) return nullptr;
        leaf l = std::atomic_ref<leaf>(r[pg >> leaf_bits]).load(std::memory_order_acquire);
        if (!l) return nullptr;
        return std::atomic_ref<span*>(l[pg & (leaf_count - 1)]).load(std::memory_order_relaxed);
    }

    // Maps the `pages` pages from `first` (page-aligned) to s. False when a
    // leaf cannot be mapped or the range lies beyond 48-bit addresses; then
    // no entry of this call was written.
    bool set(const void* first, std::size_t pages, span* s) noexcept {
        const std::uintptr_t pg = detail::address_of(first) >> page_bits;
        if (pages == 0) return true;
        if (((pg + pages - 1) >> (root_bits + leaf_bits)) != 0) return false;
        for (std::uintptr_t l = pg >> leaf_bits; l <= (pg + pages - 1) >> leaf_bits; ++l)
            if (!leaf_for(l)) return false;
        write(pg, pages, s);
        return true;
    }
    void clear(const void* first, std::size_t pages) noexcept {
        const std::uintptr_t pg = detail::address_of(first) >> page_bits;
        if (pages == 0 || ((pg + pages - 1) >> (root_bits + leaf_bits)) != 0) return;
        write(pg, pages, nullptr);
    }

    // Test hook: the next n leaf mappings fail as if the system refused them.
    void inject_leaf_failures(unsigned n) noexcept { inject_.store(n, std::memory_order_relaxed); }

    // Resident bytes of the map (root and leaves), from mincore: its real cost.
    std::size_t resident_bytes() const noexcept;
    std::size_t leaves() const noexcept { return leaves_.load(std::memory_order_relaxed); }

private:
    void write(std::uintptr_t pg, std::size_t pages, span* s) noexcept {
        root r = root_.load(std::memory_order_acquire);
        for (std::size_t i = 0; i < pages; ++i) {
            const std::uintptr_t p = pg + i;
            leaf l = std::atomic_ref<leaf>(r[p >> leaf_bits]).load(std::memory_order_acquire);
            if (l) std::atomic_ref<span*>(l[p & (leaf_count - 1)]).store(s, std::memory_order_release);
        }
    }

    leaf leaf_for(std::uintptr_t index) noexcept {
        root r = root_.load(std::memory_order_acquire);
        if (!r) {
            void* m = map(root_bytes);
            if (!m) return nullptr;
            root expected = nullptr;
            if (root_.compare_exchange_strong(expected, static_cast<root>(m), std::memory_order_acq_rel))
                r = static_cast<root>(m);
            else {
                ::munmap(m, root_bytes);
                r = expected;
            }
        }
        std::atomic_ref<leaf> slot(r[index]);
        leaf l = slot.load(std::memory_order_acquire);
        if (l) return l;
        void* m = map(leaf_bytes);
        if (!m) return nullptr;
        leaf expected = nullptr;
        if (slot.compare_exchange_strong(expected, static_cast<leaf>(m), std::memory_order_acq_rel)) {
            leaves_.fetch_add(1, std::memory_order_relaxed);
            return static_cast<leaf>(m);
        }
        ::munmap(m, leaf_bytes);
        return expected;
    }

    void* map(std::size_t bytes) noexcept {
        unsigned n = inject_.load(std::memory_order_relaxed);
        while (n > 0 && !inject_.compare_exchange_weak(n, n - 1, std::memory_order_relaxed)) {
        }
        if (n > 0) return nullptr;
        void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        return m == MAP_FAILED ? nullptr : m;
    }

    std::atomic<root> root_{nullptr};
    std::atomic<std::size_t> leaves_{0};
    std::atomic<unsigned> inject_{0};
};

inline std::size_t page_map::resident_bytes() const noexcept {
    root r = root_.load(std::memory_order_acquire);
    if (!r) return 0;
    auto resident = [](const void* p, std::size_t bytes) noexcept {
        unsigned char vec[512];
        std::size_t n = 0;
        const std::size_t pages = bytes / detail::page_size;
        for (std::size_t off = 0; off < pages; off += sizeof vec) {
            const std::size_t k = pages - off < sizeof vec ? pages - off : sizeof vec;
            if (::mincore(const_cast<std::byte*>(static_cast<const std::byte*>(p) + off * detail::page_size),
                          k * detail::page_size, vec) != 0)
                return std::size_t{0};
            for (std::size_t i = 0; i < k; ++i) n += vec[i] & 1;
        }
        return n * detail::page_size;
    };
    std::size_t total = resident(r, root_bytes);
    for (std::size_t i = 0; i < root_count; ++i)
        if (leaf l = std::atomic_ref<leaf>(r[i]).load(std::memory_order_acquire)) total += resident(l, leaf_bytes);
    return total;
}

} // namespace allotheque::backend
