// sbrk as long as the break can grow, mmap after that: the Lea allocator's and
// the paper's choice, because consecutive requests land next to each other.
//
// It must own the program break ALONE. glibc's malloc moves the break too
// (its main arena), and a program whose threads call glibc's malloc while a
// heap on this source refills races on the break and corrupts glibc's heap.
// Use it only where nothing else calls brk/sbrk: a program whose malloc is
// allotheque's own, or one linked with a malloc that never uses the break.
// arena_source (the default) gives the same adjacency without the break.
//
// Ranges given back are merged with free neighbours and reused (best fit,
// lowest address first); when the free range at the top of what this source
// took reaches the current break, the break moves back down. Free pages below
// the top are decommitted (madvise) so they leave the resident set.
// Thread-safe: every sbrk_source shares one state behind a mutex.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>

#include <allotheque/backend/range_set.hpp>
#include <allotheque/backend/record_pool.hpp>
#include <allotheque/detail/bits.hpp>
#include <allotheque/detail/immortal.hpp>
#include <allotheque/detail/os_mutex.hpp>
#include <allotheque/sources/mmap_source.hpp>
#include <allotheque/sources/source.hpp>

namespace allotheque {

class sbrk_source {
public:
    static constexpr bool zeroed = true;   // fresh break pages and DONTNEED'd pages read as zero
    static constexpr bool thread_safe = true;

    void* allocate(std::size_t n, const void* near) noexcept {
        state& st = shared();
        {
            std::lock_guard g(st.lock);
            if (backend::span* f = st.free.best_fit(n))
                return st.free.take_front(f, n, [&st](backend::span* x) noexcept { st.records.recycle(x); });
            if (!st.exhausted) {
                void* cur = ::sbrk(0);
                const std::size_t pad =
                    detail::round_up(detail::address_of(cur), detail::page_size) - detail::address_of(cur);
                void* p = ::sbrk(static_cast<std::intptr_t>(n + pad));
                if (p != reinterpret_cast<void*>(-1)) {
                    const std::uintptr_t start = detail::address_of(p) + pad;
                    if (st.base == 0) st.base = start;
                    if (start + n > st.top) st.top = start + n;
                    return reinterpret_cast<void*>(start);
                }
                st.exhausted = true;
            }
        }
        return mmap_source{}.allocate(n, near);
    }

    void deallocate(void* p, std::size_t n) noexcept {
        state& st = shared();
        std::lock_guard g(st.lock);
        const std::uintptr_t a = detail::address_of(p);
        if (st.base == 0 || a < st.base || a >= st.top) return mmap_source{}.deallocate(p, n);
        backend::span* r = st.records.make(st.meta);
        if (!r) {   // cannot describe the range: keep it resident-free at least
            ::madvise(p, n, MADV_DONTNEED);
            return;
        }
        r->base = static_cast<std::byte*>(p);
        r->bytes = n;
        r->dirty = n;
        r = st.free.insert(r, [&st](backend::span* x) noexcept { st.records.recycle(x); });
        if (detail::address_of(r->end()) == st.top && detail::address_of(::sbrk(0)) == st.top) {
            // The top of the break is free: move the break back down.
            st.free.erase(r);
            if (::sbrk(-static_cast<std::intptr_t>(r->bytes)) != reinterpret_cast<void*>(-1)) {
                st.top -= r->bytes;
                st.records.recycle(r);
                return;
            }
            r = st.free.insert(r, [&st](backend::span* x) noexcept { st.records.recycle(x); });
        }
        if (::madvise(r->base, r->bytes, MADV_DONTNEED) == 0) st.free.mark_clean(r);
    }

    bool decommit(void* p, std::size_t n) noexcept { return ::madvise(p, n, MADV_DONTNEED) == 0; }

    // For tests: bytes in free ranges below the top of the break.
    static std::size_t free_bytes() noexcept {
        std::lock_guard g(shared().lock);
        return shared().free.bytes();
    }

private:
    struct state {
        detail::os_mutex lock;
        std::uintptr_t base = 0, top = 0;   // what this process took with sbrk
        bool exhausted = false;
        backend::range_set free;
        backend::record_pool<backend::span> records;
        mmap_source meta;
    };
    static state& shared() noexcept { return detail::immortal<state>(); }
};

static_assert(source<sbrk_source> && decommitting_source<sbrk_source>);

} // namespace allotheque
