// The page map: for each 4 KiB page of the address space, the span that holds
// it (or nothing). One map per process, shared by every heap, because "which
// heap owns p" must be answerable by any thread for any pointer (remote frees,
// malloc's free(p), usable_size(p) without a size).
//
// Layout: one flat array, an entry per page, reserved at the first set() as
// address space that reads as zero (PROT_READ, MAP_NORESERVE: no memory and
// no commit charge, even under strict overcommit) and made writable a leaf
// (2 MiB of entries, a gigabyte of addresses) at a time, when a span first
// needs it; the resident cost is one 8-byte entry per page of heap in use.
// The map covers the 2^35 pages of 47-bit user space when the system grants
// the 256 GiB of address space that takes (counted in VmSize, never in RSS or
// core dumps). When it does not (`ulimit -v`, valgrind's 64 GiB limit), it
// covers a window of at most 512 GiB of addresses, with a map of at most
// 1/64 of the address-space limit, and a page's entry is its number modulo
// the window (aliases, below).
//
// An entry is its span's address less the map's base, so that 0 names the
// map's first bytes: zeros, which read as an empty span (no owner, no chunk
// handed out). free's lookup then needs no test for "no span": the chunk-start
// test it makes anyway refuses the empty span. Before the first set(), the map
// is a static one-entry map of the same shape. The lookup is a shift, a mask,
// the base and the entry (free's path: 7 instructions; two levels took 12).
//
// Aliases (a window smaller than user space): pages a multiple of the window
// apart share an entry. set() refuses a page whose entry names a span that
// holds one of its aliases, clear() leaves such an entry alone, and find()
// answers nullptr for a page whose entry names an alias's span. Our spans so
// far apart are rare (arenas are reserved next to each other); a refusal is a
// failed allocation, never a wrong answer.
//
// Threads: a span's pages are written by the heap that holds the span and read
// by anyone; entries are atomic (relaxed stores; a reader that may see a span
// a moment after its creation acquires it through whatever handed it the
// pointer). The base is published before the mask (release), and a lookup
// reads the mask first (acquire), so it pairs a mask with a base that fits.
// Failure: set() returns false when a leaf cannot be made writable or an alias
// holds an entry, and then leaves no entry of that call behind.
#pragma once
#include <sys/mman.h>
#include <sys/resource.h>

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>

#include <allotheque/backend/span.hpp>
#include <allotheque/detail/bits.hpp>

namespace allotheque::backend {

class page_map {
    static constexpr unsigned page_bits = 12;
    static constexpr unsigned leaf_bits = 18;
    static constexpr unsigned min_window_bits = 20;   // 8 MiB of entries, 4 GiB of addresses
    static constexpr std::size_t leaf_count = std::size_t{1} << leaf_bits;
    static_assert(detail::page_size == std::size_t{1} << page_bits);

    using entry = std::intptr_t;
    // Where the entries start: after the empty span that entry 0 names.
    static constexpr std::size_t head = sizeof(span);
    struct alignas(64) empty_map {
        std::byte none[head];
        entry only;
    };

public:
    static constexpr unsigned user_bits = 47;
    static constexpr unsigned max_window_bits = user_bits - page_bits;
    static constexpr std::size_t leaf_bytes = leaf_count * sizeof(entry);

    // window_bits: the most pages (log 2) the map may cover; tests ask for
    // less to see aliases.
    constexpr explicit page_map(unsigned window_bits = max_window_bits) noexcept : want_bits_(window_bits) {}
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
        const looked l = look(p);
        // Read after the entry: a span set past the window lowers it first.
        if (l.pg > unaliased_.load(std::memory_order_relaxed)) [[unlikely]]
            return find_past(p);
        return l.e == 0 ? nullptr : at(l.b, l.e);
    }

    // The entry of p's page taken modulo the window, never null: the span
    // there, which may not hold p (an alias, an address past user space), or
    // the empty span when there is none. For a caller whose next test
    // refuses every address outside the span it gets (free's chunk-start
    // test does, and refuses everything for the empty span, whose owner is
    // null and which hands out no chunk): no range test, no null test.
    [[gnu::always_inline]] span* find_wrapped(const void* p) const noexcept {
        std::uintptr_t i = detail::address_of(p) >> page_bits;
        std::uintptr_t b;
#if defined(__x86_64__)
        // The mask's load folded into the `and`, which a compiler never does
        // with an atomic load (one instruction on every free), then the
        // base's: aligned 8-byte loads are atomic on x86 and are not
        // reordered with each other, so this is the acquire below.
        asm("andq %[mask], %[i]\n\tmovq %[base], %[b]"
            : [i] "+r"(i), [b] "=r"(b)
            : [mask] "m"(mask_), [base] "m"(base_));
#else
        i &= mask_.load(std::memory_order_acquire);
        b = detail::address_of(base_.load(std::memory_order_relaxed));
#endif
        return at(b, load(b, i));
    }

    // Maps the `pages` pages from `first` (page-aligned) to s. False when a
    // leaf cannot be made writable, the range lies beyond user space or an
    // alias holds an entry; then no entry of this call was written.
    bool set(const void* first, std::size_t pages, span* s) noexcept;
    // Clears the entries of those pages (not an alias's).
    void clear(const void* first, std::size_t pages) noexcept;

    // Test hook: the next n leaves fail to be made writable, as if the system
    // refused them.
    void inject_leaf_failures(unsigned n) noexcept { inject_.store(n, std::memory_order_relaxed); }

    // Resident bytes of the map's leaves, from mincore: its real cost.
    std::size_t resident_bytes() const noexcept;
    std::size_t leaves() const noexcept { return leaves_.load(std::memory_order_relaxed); }
    // The pages the map covers (log 2); 0 before the first set().
    unsigned window_bits() const noexcept { return static_cast<unsigned>(std::popcount(mask_.load(std::memory_order_acquire))); }

private:
    static constexpr std::uintptr_t max_mask = (std::uintptr_t{1} << max_window_bits) - 1;
    static constexpr std::size_t leaf_words = (std::size_t{1} << (max_window_bits - leaf_bits)) / 64;

    template <int Order = __ATOMIC_RELAXED>
    static entry load(std::uintptr_t b, std::uintptr_t i) noexcept {
        return __atomic_load_n(reinterpret_cast<const entry*>(b + head) + i, Order);
    }
    static entry* slot(std::uintptr_t b, std::uintptr_t i) noexcept { return reinterpret_cast<entry*>(b + head) + i; }
    static span* at(std::uintptr_t b, entry e) noexcept {
        return reinterpret_cast<span*>(b + static_cast<std::uintptr_t>(e));
    }
    // Whether s, the span an entry names, holds a page other than pg with
    // pg's entry (pg itself outside s): then that entry is not pg's.
    static bool holds_alias(const span& s, std::uintptr_t pg, std::uintptr_t m) noexcept {
        const std::uintptr_t lo = detail::address_of(s.base) >> page_bits;
        const std::uintptr_t n = s.bytes ? (s.bytes - 1) / detail::page_size + 1 : 1;
        if (pg - lo < n) return false;
        return n > m || ((pg - lo) & m) < n;
    }

    // p's page, the window's mask, the map's base and the page's entry
    // (acquired: the span it names was set before it).
    struct looked {
        std::uintptr_t pg, m, b;
        entry e;
    };
    [[gnu::always_inline]] looked look(const void* p) const noexcept {
        const std::uintptr_t pg = detail::address_of(p) >> page_bits;
        const std::uintptr_t m = mask_.load(std::memory_order_acquire);
        const std::uintptr_t b = detail::address_of(base_.load(std::memory_order_relaxed));
        return {pg, m, b, load<__ATOMIC_ACQUIRE>(b, pg & m)};
    }
    // find() for a page that may find an alias's entry, or lie past user space.
    // (Looked up again: find() keeps its lookup in registers.)
    [[gnu::noinline, gnu::cold]] span* find_past(const void* p) const noexcept {
        const looked l = look(p);
        if (l.e == 0 || (l.pg >> max_window_bits) != 0 || holds_alias(*at(l.b, l.e), l.pg, l.m)) return nullptr;
        return at(l.b, l.e);
    }
    bool reserve() noexcept;
    static unsigned fallback_bits(unsigned w) noexcept;
    bool make_writable(std::uintptr_t leaf) noexcept;

    static constinit inline empty_map empty_{};
    std::atomic<const std::byte*> base_{empty_.none};
    std::atomic<std::uintptr_t> mask_{0};
    unsigned want_bits_;
    // Pages above this may find an alias's entry: none with the whole of
    // user space; past the window in one; every page once a page past the
    // window has been set (published before its entry, which find()
    // acquires).
    std::atomic<std::uintptr_t> unaliased_{max_mask};
    std::atomic<int> state_{0};   // 0: no window, 1: being reserved, 2: reserved
    std::atomic<std::size_t> leaves_{0};
    std::atomic<unsigned> inject_{0};
    std::atomic<std::uint64_t> writable_[leaf_words] = {};   // a bit per leaf made writable
};

inline bool page_map::reserve() noexcept {
    int s = state_.load(std::memory_order_acquire);
    if (s == 2) return true;
    if (s == 0 && state_.compare_exchange_strong(s, 1, std::memory_order_acq_rel)) {
        for (unsigned w = want_bits_; w >= min_window_bits; w = w == want_bits_ ? fallback_bits(w) : w - 1) {
            const std::size_t bytes = (sizeof(entry) << w) + detail::page_size;
            void* m = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (m == MAP_FAILED) continue;
            // Sparse: with transparent huge pages "always", the first entry
            // written would make 2 MiB resident. And kept out of core dumps,
            // which would otherwise write its 256 GiB of zeros.
            ::madvise(m, bytes, MADV_NOHUGEPAGE);
            ::madvise(m, bytes, MADV_DONTDUMP);
            base_.store(static_cast<const std::byte*>(m), std::memory_order_relaxed);
            unaliased_.store((std::uintptr_t{1} << w) - 1, std::memory_order_relaxed);
            mask_.store((std::uintptr_t{1} << w) - 1, std::memory_order_release);
            state_.store(2, std::memory_order_release);
            return true;
        }
        state_.store(0, std::memory_order_release);   // the next set() tries again
        return false;
    }
    while ((s = state_.load(std::memory_order_acquire)) == 1) {
    }
    return s == 2;
}

// Refused the whole of user space (a `ulimit -v`, valgrind): a window of at
// most 512 GiB of addresses (a map of 1 GiB) and at most 1/64 of the address
// space the limit allows, so that the map leaves the program its room.
inline unsigned page_map::fallback_bits(unsigned w) noexcept {
    unsigned bits = w < 27 ? w : 27;
    rlimit rl{};
    if (::getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        while (bits > min_window_bits && (sizeof(entry) << bits) > rl.rlim_cur / 64) --bits;
    return bits < w ? bits : w - 1;
}

inline bool page_map::make_writable(std::uintptr_t leaf) noexcept {
    std::atomic<std::uint64_t>& word = writable_[leaf / 64];
    const std::uint64_t bit = std::uint64_t{1} << (leaf % 64);
    if (word.load(std::memory_order_acquire) & bit) return true;
    unsigned n = inject_.load(std::memory_order_relaxed);
    while (n > 0 && !inject_.compare_exchange_weak(n, n - 1, std::memory_order_relaxed)) {
    }
    if (n > 0) return false;
    // The leaf's entries start `head` bytes into its first page, so they
    // reach that far into the page after it (the map has a page to spare).
    const std::uintptr_t b = detail::address_of(base_.load(std::memory_order_relaxed));
    if (::mprotect(reinterpret_cast<void*>(b + leaf * leaf_bytes), leaf_bytes + detail::page_size,
                   PROT_READ | PROT_WRITE) != 0)
        return false;
    if (!(word.fetch_or(bit, std::memory_order_acq_rel) & bit)) leaves_.fetch_add(1, std::memory_order_relaxed);
    return true;
}

inline bool page_map::set(const void* first, std::size_t pages, span* s) noexcept {
    const std::uintptr_t pg = detail::address_of(first) >> page_bits;
    if (pages == 0) return true;
    if (pages > max_mask || ((pg + pages - 1) >> max_window_bits) != 0) return false;
    if (!reserve()) return false;
    const std::uintptr_t m = mask_.load(std::memory_order_acquire);
    const std::uintptr_t b = detail::address_of(base_.load(std::memory_order_relaxed));
    if (pages > m) return false;
    for (std::uintptr_t q = pg; q < pg + pages; q = (q | (leaf_count - 1)) + 1)
        if (!make_writable((q & m) >> leaf_bits)) return false;
    const auto v = static_cast<entry>(detail::address_of(s) - b);
    if (m == max_mask) {
        for (std::size_t i = 0; i < pages; ++i) __atomic_store_n(slot(b, pg + i), v, __ATOMIC_RELEASE);
        return true;
    }
    if (((pg + pages - 1) & ~m) != 0) unaliased_.store(0, std::memory_order_relaxed);
    // A window: each entry is claimed unless an alias's span holds it, and
    // the claims are undone on a refusal. Two spans that alias each other,
    // set at once, may both be refused; neither can take the other's entry.
    for (std::size_t i = 0; i < pages; ++i) {
        entry* e = slot(b, (pg + i) & m);
        entry old = __atomic_load_n(e, __ATOMIC_ACQUIRE);
        for (;;) {
            if (old != 0 && old != v && holds_alias(*at(b, old), pg + i, m)) {
                for (std::size_t j = 0; j < i; ++j) {
                    entry mine = v;
                    __atomic_compare_exchange_n(slot(b, (pg + j) & m), &mine, 0, false, __ATOMIC_RELEASE,
                                                __ATOMIC_RELAXED);
                }
                return false;
            }
            if (__atomic_compare_exchange_n(e, &old, v, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) break;
        }
    }
    return true;
}

inline void page_map::clear(const void* first, std::size_t pages) noexcept {
    const std::uintptr_t pg = detail::address_of(first) >> page_bits;
    if (pages == 0 || ((pg + pages - 1) >> max_window_bits) != 0 || state_.load(std::memory_order_acquire) != 2) return;
    const std::uintptr_t m = mask_.load(std::memory_order_acquire);
    const std::uintptr_t b = detail::address_of(base_.load(std::memory_order_relaxed));
    if (m == max_mask) {   // the whole of user space: no alias
        for (std::size_t i = 0; i < pages; ++i)
            if (entry* e = slot(b, pg + i); __atomic_load_n(e, __ATOMIC_RELAXED) != 0)
                __atomic_store_n(e, 0, __ATOMIC_RELEASE);
        return;
    }
    for (std::size_t i = 0; i < pages; ++i) {
        entry* e = slot(b, (pg + i) & m);
        entry old = __atomic_load_n(e, __ATOMIC_ACQUIRE);
        while (old != 0 && !holds_alias(*at(b, old), pg + i, m) &&
               !__atomic_compare_exchange_n(e, &old, 0, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        }
    }
}

inline std::size_t page_map::resident_bytes() const noexcept {
    if (state_.load(std::memory_order_acquire) != 2) return 0;
    const std::uintptr_t b = detail::address_of(base_.load(std::memory_order_relaxed));
    constexpr std::size_t pages = leaf_bytes / detail::page_size + 1;
    std::size_t total = 0;
    for (std::size_t w = 0; w < leaf_words; ++w)
        for (std::uint64_t bits = writable_[w].load(std::memory_order_acquire); bits; bits &= bits - 1) {
            const std::size_t leaf = w * 64 + static_cast<std::size_t>(std::countr_zero(bits));
            unsigned char vec[pages];
            if (::mincore(reinterpret_cast<void*>(b + leaf * leaf_bytes), pages * detail::page_size, vec) != 0) continue;
            for (unsigned char v : vec) total += (v & 1) * detail::page_size;
        }
    return total;
}

} // namespace allotheque::backend
