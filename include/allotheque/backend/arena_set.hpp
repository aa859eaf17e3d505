// The arenas behind arena_source: reserved address ranges, the free ranges
// in them (coalesced, best fit, lowest address first) and the records that
// describe both. Not thread-safe: arena_source holds its mutex around every
// call. Split from arena_source so that the source reads as its contract
// (allocate, deallocate, extend, move) and this as the bookkeeping it shares.
#pragma once
#include <sys/mman.h>

#include <cstddef>

#include <boost/intrusive/list.hpp>

#include <allotheque/backend/range_set.hpp>
#include <allotheque/backend/record_pool.hpp>
#include <allotheque/backend/span.hpp>
#include <allotheque/detail/bits.hpp>
#include <allotheque/sources/mmap_source.hpp>

namespace allotheque::backend {

struct arena_set {
    static constexpr std::size_t first_arena = std::size_t{64} << 20;
    static constexpr std::size_t max_arena = std::size_t{1} << 30;
    // Where a reserved arena starts (map_aligned): a multiple of every
    // address class the library's heaps use.
    static constexpr std::size_t arena_align = std::size_t{2} << 20;

    range_set free;
    record_pool<span> records;
    mmap_source meta;
    bi::list<span, bi::member_hook<span, span::list_hook, &span::by_age>, bi::constant_time_size<false>> arenas;
    std::size_t arena_count = 0, reserved = 0;
    std::size_t next_size = first_arena;

    // [b, b+n) of `arena` free again (r: a record for it); an arena
    // wholly free is unmapped, unless it is the last one.
    void take_back(span* r, std::byte* b, std::size_t n, span* arena) noexcept {
        r->base = b;
        r->bytes = n;
        r->region = arena;
        r = free.insert(r, [this](span* x) noexcept { records.recycle(x); });
        if (r->base == arena->base && r->bytes == arena->bytes && arena_count > 1) {
            free.erase(r);
            records.recycle(r);
            unmap_arena(arena);
        }
    }

    bool reserve(std::size_t n) noexcept {
        const std::size_t exact = detail::round_up(n, detail::page_size);
        if (exact < n) return false;
        span* a = records.make(meta);
        span* f = a ? records.make(meta) : nullptr;
        if (!f) {
            if (a) records.recycle(a);
            return false;
        }
        std::size_t size = next_size > n ? next_size : exact;
        void* m = MAP_FAILED;
        bool refused = false;
        for (;;) {
            // An arena sized for one request is mapped as the C library
            // would map that block, so the kernel's overcommit policy
            // judges it: a request no memory could back (64 TiB) fails
            // here, at once, instead of succeeding as a reservation.
            const int noreserve = size > exact ? MAP_NORESERVE : 0;
            if (noreserve) {
                m = map_aligned(size);
                if (m != MAP_FAILED) break;
            }
            m = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | noreserve, -1, 0);
            if (m != MAP_FAILED || size <= n) break;
            refused = true;
            size = detail::round_up(size / 2 > n ? size / 2 : n, detail::page_size);
        }
        // Refused at the request's own size: unmap the free ends of the
        // arenas and try that size once more.
        if (m == MAP_FAILED && release_free_ends() > 0)
            m = ::mmap(nullptr, size = exact, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
            records.recycle(f);
            records.recycle(a);
            return false;
        }
        // Refused first: the address space is nearly all taken (a tight
        // `ulimit -v`). An arena of all that is left would leave nothing
        // for what is mapped beside the arenas (page-map leaves, span
        // records), and a heap with free arena space could then fail to
        // use it: keep half, at least the request.
        if (refused && size > exact) {
            const std::size_t keep = detail::round_up(size / 2 > exact ? size / 2 : exact, detail::page_size);
            if (keep < size) {
                ::munmap(static_cast<std::byte*>(m) + keep, size - keep);
                size = keep;
            }
        }
        if (next_size < max_arena) next_size *= 2;
        a->base = static_cast<std::byte*>(m);
        a->bytes = size;
        a->state = span_state::region;
        arenas.push_back(*a);
        ++arena_count;
        reserved += size;
        f->base = a->base;
        f->bytes = size;
        f->region = a;
        free.insert(f, [this](span* x) noexcept { records.recycle(x); });
        return true;
    }
    // A reservation of `size` bytes starting on an arena_align boundary
    // (the slack around it given back at once), or MAP_FAILED. Where a
    // span lands among the classes of an address attribute (Velox' 64
    // KiB vicinities, Medius' pages) then no longer depends on what the
    // process mapped before: one page more of program text moved
    // velox_heap's instructions on random sizes by 3 %.
    static void* map_aligned(std::size_t size) noexcept {
        const std::size_t slack = arena_align - detail::page_size;
        if (size > ~std::size_t{0} - slack) return MAP_FAILED;
        void* m = ::mmap(nullptr, size + slack, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) return m;
        auto* const b = static_cast<std::byte*>(m);
        const std::size_t head = detail::round_up(detail::address_of(b), arena_align) - detail::address_of(b);
        if (head != 0) ::munmap(b, head);
        if (slack - head != 0) ::munmap(b + head + size, slack - head);
        return b + head;
    }
    // Unmaps every arena's free end (a wholly free arena goes, even the
    // last one); the bytes unmapped.
    std::size_t release_free_ends() noexcept {
        std::size_t released = 0;
        for (auto it = arenas.begin(); it != arenas.end();) {
            span& a = *it++;
            span* f = free.containing(a.end() - 1);
            if (!f || f->region != &a) continue;
            std::byte* const base = f->base;
            const std::size_t bytes = f->bytes;
            free.erase(f);
            records.recycle(f);
            released += bytes;
            if (base == a.base) {
                unmap_arena(&a);
                continue;
            }
            ::munmap(base, bytes);
            a.bytes -= bytes;
            reserved -= bytes;
        }
        return released;
    }
    span* arena_of(const std::byte* p) noexcept {
        for (span& a : arenas)
            if (a.contains(p)) return &a;
        return nullptr;
    }
    void unmap_arena(span* a) noexcept {
        ::munmap(a->base, a->bytes);
        forget_arena(a);
    }
    // An arena whose addresses are no longer ours to unmap.
    void forget_arena(span* a) noexcept {
        arenas.erase(arenas.iterator_to(*a));
        --arena_count;
        reserved -= a->bytes;
        records.recycle(a);
    }
};

} // namespace allotheque::backend
