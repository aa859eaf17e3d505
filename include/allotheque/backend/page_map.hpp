// The page map: for each 4 KiB page of the address space, the span that holds
// it (or nothing). One map per process, shared by every heap, because "which
// heap owns p" must be answerable by any thread for any pointer (remote frees,
// malloc's free(p), usable_size(p) without a size).
//
// Layout: 48-bit addresses, 36-bit page numbers split 18 / 18. The root (2 MiB
// of entries) and each leaf (2 MiB, covering 1 GiB of addresses) are mapped
// lazily with MAP_NORESERVE and without huge pages, so the resident cost is
// one 8-byte entry per page of heap in use (0.2 %) plus the touched root pages.
// A root entry is its leaf's address less the leaf's first page number times
// 8 (zero: no leaf), so that the whole page number indexes it: the lookup
// masks nothing after the root (free's path: one instruction less).
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
    // A root entry: leaf - (index << leaf_bits) entries, as an integer.
    using biased = std::uintptr_t;

public:
    static constexpr std::size_t leaf_bytes = leaf_count * sizeof(span*);
    static constexpr std::size_t root_bytes = root_count * sizeof(leaf);
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
        if ((pg >> (root_bits + leaf_bits)) != 0) return nullptr;
        const biased b = root_[pg >> leaf_bits].load(std::memory_order_acquire);
        if (!b) return nullptr;
        return std::atomic_ref<span*>(*entry(b, pg)).load(std::memory_order_relaxed);
    }

    // find() without its range test, for a caller whose next test rejects
    // every address outside the span it gets (free's chunk-start test does:
    // an offset of 2^48 or more is no chunk of any span): the address is
    // taken modulo 2^48, so null and any other address give nullptr or a
    // span that test refuses. Saves free a compare and a branch.
    [[gnu::always_inline]] span* find_wrapped(const void* p) const noexcept {
        // The page number modulo 2^36 by two shifts, so that the root's
        // index needs no mask either.
        const std::uintptr_t pg = (detail::address_of(p) << (64 - address_bits)) >> (64 - address_bits + page_bits);
        const biased b = root_[pg >> leaf_bits].load(std::memory_order_acquire);
        if (!b) return nullptr;
        return std::atomic_ref<span*>(*entry(b, pg)).load(std::memory_order_relaxed);
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
    // The entry of page number pg (below 2^36) in the leaf whose root entry is b.
    static span** entry(biased b, std::uintptr_t pg) noexcept {
        return reinterpret_cast<span**>(b + pg * sizeof(span*));
    }
    static biased bias(void* l, std::uintptr_t index) noexcept {
        return detail::address_of(l) - (index << leaf_bits) * sizeof(span*);
    }
    static leaf unbias(biased b, std::uintptr_t index) noexcept { return entry(b, index << leaf_bits); }

    void write(std::uintptr_t pg, std::size_t pages, span* s) noexcept {
        for (std::size_t i = 0; i < pages; ++i) {
            const std::uintptr_t p = pg + i;
            if (const biased b = root_[p >> leaf_bits].load(std::memory_order_acquire))
                std::atomic_ref<span*>(*entry(b, p)).store(s, std::memory_order_release);
        }
    }

    leaf leaf_for(std::uintptr_t index) noexcept {
        std::atomic<biased>& slot = root_[index];
        if (const biased b = slot.load(std::memory_order_acquire)) return unbias(b, index);
        prepare_root();
        void* m = map(leaf_bytes);
        if (!m) return nullptr;
        if (bias(m, index) == 0) {   // it would read as no leaf: take another address
            void* other = map(leaf_bytes);
            ::munmap(m, leaf_bytes);
            if (!other) return nullptr;
            m = other;   // mapped while m was, so at another address
        }
        biased expected = 0;
        if (slot.compare_exchange_strong(expected, bias(m, index), std::memory_order_acq_rel)) {
            leaves_.fetch_add(1, std::memory_order_relaxed);
            return static_cast<leaf>(m);
        }
        ::munmap(m, leaf_bytes);
        return unbias(expected, index);
    }

    // The root lives in static storage, where transparent huge pages
    // ("always") make the whole 2 MiB resident on its first write: that was
    // most of the 1.5 MB the malloc added to every process. Before the first
    // leaf is installed the root holds only zeros, so its pages can be
    // dropped and kept small; later callers wait for that to finish.
    void prepare_root() noexcept {
        int s = root_state_.load(std::memory_order_acquire);
        if (s == 2) return;
        if (s == 0 && root_state_.compare_exchange_strong(s, 1, std::memory_order_acq_rel)) {
            const std::uintptr_t lo = detail::round_up(detail::address_of(&root_[0]), detail::page_size);
            const std::uintptr_t hi = (detail::address_of(&root_[0]) + root_bytes) & ~(detail::page_size - 1);
            auto* p = reinterpret_cast<void*>(lo);
            ::madvise(p, hi - lo, MADV_NOHUGEPAGE);
            ::madvise(p, hi - lo, MADV_DONTNEED);
            root_state_.store(2, std::memory_order_release);
            return;
        }
        while (root_state_.load(std::memory_order_acquire) != 2) {
        }
    }

    void* map(std::size_t bytes) noexcept {
        unsigned n = inject_.load(std::memory_order_relaxed);
        while (n > 0 && !inject_.compare_exchange_weak(n, n - 1, std::memory_order_relaxed)) {
        }
        if (n > 0) return nullptr;
        void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) return nullptr;
        // A leaf is 2 MiB and sparse: with transparent huge pages "always",
        // the first entry written would make all 2 MiB resident.
        ::madvise(m, bytes, MADV_NOHUGEPAGE);
        return m;
    }

    std::atomic<biased> root_[root_count] = {};   // 2 MiB of zero pages until touched
    std::atomic<std::size_t> leaves_{0};
    std::atomic<unsigned> inject_{0};
    std::atomic<int> root_state_{0};   // 0: untouched, 1: being prepared, 2: ready
};

inline std::size_t page_map::resident_bytes() const noexcept {
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
    // The root is in static storage, not page-aligned: count its touched pages
    // from the page that holds its start.
    const auto start = detail::address_of(&root_[0]) & ~(detail::page_size - 1);
    std::size_t total = resident(reinterpret_cast<const void*>(start), root_bytes + detail::page_size);
    for (std::size_t i = 0; i < root_count; ++i)
        if (const biased b = root_[i].load(std::memory_order_acquire)) total += resident(unbias(b, i), leaf_bytes);
    return total;
}

} // namespace allotheque::backend
