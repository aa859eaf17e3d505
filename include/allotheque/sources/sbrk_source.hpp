// sbrk as long as the break can grow, mmap after that: the Lea allocator's
// choice and the paper's, because consecutive requests land next to each other.
//
// The program break is process-wide, so every sbrk_source shares one arena
// behind a mutex. That mutex cannot cover the C library: glibc's malloc also
// moves the break (main arena), so a program whose threads use glibc malloc
// while another thread refills an sbrk_source heap races on the break. Use
// mmap_source for heaps shared by threads (layers::locked, per_thread) in
// programs that also call malloc. A range given back at the top of the break shrinks it; one
// given back below the top is kept on a free list (its header written in the
// range itself) for the next request that fits, since the break cannot have
// holes returned to the system.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <mutex>

#include <allotheque/detail/bits.hpp>
#include <allotheque/sources/mmap_source.hpp>
#include <allotheque/sources/source.hpp>

namespace allotheque {

class sbrk_source {
    struct free_range {
        free_range* next;
        std::size_t size;
    };
    struct arena {
        std::mutex lock;
        std::uintptr_t base = 0, top = 0;   // what this process took with sbrk
        free_range* free = nullptr;
        bool exhausted = false;
    };
    static arena& shared() noexcept {
        static arena a;
        return a;
    }
    static bool owns(const arena& a, const void* p) noexcept {
        auto x = detail::address_of(p);
        return a.base != 0 && x >= a.base && x < a.top;
    }

public:
    void* allocate(std::size_t n, const void* near) noexcept {
        arena& a = shared();
        {
            std::lock_guard g(a.lock);
            for (free_range** f = &a.free; *f; f = &(*f)->next) {
                if ((*f)->size < n) continue;
                free_range* r = *f;
                if (r->size > n) {   // keep the tail on the list
                    auto* tail = reinterpret_cast<free_range*>(reinterpret_cast<std::byte*>(r) + n);
                    *tail = {r->next, r->size - n};
                    *f = tail;
                } else {
                    *f = r->next;
                }
                return r;
            }
            if (!a.exhausted) {
                void* cur = ::sbrk(0);
                const std::size_t pad = detail::round_up(detail::address_of(cur), detail::page_size) -
                                        detail::address_of(cur);
                void* p = ::sbrk(static_cast<std::intptr_t>(n + pad));
                if (p != reinterpret_cast<void*>(-1)) {
                    auto start = detail::address_of(p) + pad;
                    // The C library may move the break too: everything between our first
                    // range and our highest one counts as ours, but only ranges we handed
                    // out ever come back, so glibc's blocks in between are never touched.
                    if (a.base == 0) a.base = start;
                    if (start + n > a.top) a.top = start + n;
                    return reinterpret_cast<void*>(start);
                }
                a.exhausted = true;
            }
        }
        return mmap_source{}.allocate(n, near);
    }

    void deallocate(void* p, std::size_t n) noexcept {
        arena& a = shared();
        std::lock_guard g(a.lock);
        if (!owns(a, p)) return mmap_source{}.deallocate(p, n);
        if (detail::address_of(p) + n == a.top && detail::address_of(::sbrk(0)) == a.top) {
            ::sbrk(-static_cast<std::intptr_t>(n));
            a.top -= n;
            return;
        }
        a.free = ::new (p) free_range{a.free, n};
    }
};

static_assert(source<sbrk_source>);

} // namespace allotheque
