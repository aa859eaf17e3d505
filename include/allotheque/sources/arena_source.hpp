// The default source: large reserved address ranges ("arenas"), committed on
// demand, shared by every heap of the process.
//
// Why: the paper took memory with sbrk so that consecutive refills land next
// to each other. The program break belongs to the C library, though (glibc's
// malloc moves it too, and two movers corrupt each other), so this source
// keeps the property without touching the break: it reserves an arena of
// address space with one mmap(MAP_NORESERVE) — pages cost nothing until they
// are touched — and hands out consecutive ranges from it, so consecutive
// requests are adjacent, as with sbrk.
//
// Ranges given back are decommitted at once (madvise(MADV_DONTNEED): the pages
// leave the resident set and read as zero), merged with free neighbours in the
// same arena and reused, best fit, lowest address first. An arena that becomes
// entirely free is unmapped, except the last one left. Arenas start at 64 MiB
// and double up to 1 GiB, each reserved on a 2 MiB boundary; when the system
// refuses a reservation (a tight `ulimit -v`, strict overcommit) the size is
// halved down to the request, and if even that is refused, the free ends of
// the arenas are unmapped and the request tried once more: reserved address
// space counts against `ulimit -v` whether used or not.
//
// Thread-safe (one mutex; the heaps above ask it only to grow, rarely) and
// fork-safe: the mutex is taken around fork after every thread registry's
// (detail/fork_guard.hpp), from the first use on.
// Addresses the heap gives back must be ranges it got, as for every source.
#pragma once
#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <mutex>

#include <allotheque/backend/arena_set.hpp>
#include <allotheque/backend/span.hpp>
#include <allotheque/detail/bits.hpp>
#include <allotheque/detail/fail.hpp>
#include <allotheque/detail/fork_guard.hpp>
#include <allotheque/detail/immortal.hpp>
#include <allotheque/detail/os_mutex.hpp>
#include <allotheque/detail/remap.hpp>
#include <allotheque/sources/source.hpp>

namespace allotheque {

class arena_source {
public:
    static constexpr bool zeroed = true;
    static constexpr bool thread_safe = true;
    static constexpr std::size_t first_arena = backend::arena_set::first_arena;
    static constexpr std::size_t max_arena = backend::arena_set::max_arena;
    static constexpr std::size_t arena_align = backend::arena_set::arena_align;

    void* allocate(std::size_t n, const void* /*near: ranges are handed out in address order*/) noexcept {
        state& st = shared();
        st.register_fork_handlers();
        std::lock_guard g(st.lock);
        backend::span* f = st.free.best_fit(n);
        if (!f && !st.reserve(n)) return nullptr;
        if (!f) f = st.free.best_fit(n);
        std::byte* p = st.free.take_front(f, n, [&st](backend::span* x) noexcept { st.records.recycle(x); });
        st.handed_out += n;
        return p;
    }

    void deallocate(void* p, std::size_t n) noexcept {
        state& st = shared();
        ::madvise(p, n, MADV_DONTNEED);   // the pages leave the resident set now
        std::lock_guard g(st.lock);
        st.handed_out -= n;
        auto* b = static_cast<std::byte*>(p);
        backend::span* arena = st.arena_of(b);
        backend::span* r = st.records.make(st.meta);
        if (!arena || !r) {
            // Not ours (a caller bug), or no record for it: unmap rather than
            // keep a range nobody can describe.
            if (r) st.records.recycle(r);
            ::munmap(p, n);
            return;
        }
        st.take_back(r, b, n, arena);
    }

    // Where move puts a block: an arena of its own of exactly n bytes,
    // reserved here. Nothing is carved from it and it never grows in place,
    // so its pages stay one mapping of the kernel's and the next move of the
    // block takes them whole (detail::one_mapping). nullptr when the system
    // refuses.
    void* allocate_apart(std::size_t n) noexcept {
        state& st = shared();
        st.register_fork_handlers();
        std::lock_guard g(st.lock);
        backend::span* a = st.records.make(st.meta);
        if (!a) return nullptr;
        void* m = state::map_aligned(n);
        if (m == MAP_FAILED)   // without the alignment's slack, under a tight `ulimit -v`
            m = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) {
            st.records.recycle(a);
            return nullptr;
        }
        a->base = static_cast<std::byte*>(m);
        a->bytes = n;
        a->state = backend::span_state::region;
        st.arenas.push_back(*a);
        ++st.arena_count;
        st.reserved += n;
        st.handed_out += n;
        return m;
    }

    // A large block grown by realloc past the free pages after it moves; its
    // pages move with mremap, where a copy would hold the old and the new
    // block at once (a buffer doubled to 512 MiB peaked at 769 MB against
    // glibc's 513, which remaps its mapped chunks). `to` must be a whole
    // range of allocate_apart's, not holding `from`: anything else is the
    // caller's bug and aborts, since no answer would leave the caller's
    // count of `to` right. A refusal takes `to` back; where mremap failed
    // after the kernel had unmapped it (a late ENOMEM under strict
    // overcommit), its addresses may be another thread's by now, and they
    // are forgotten, never unmapped.
    [[gnu::noinline, gnu::cold]] bool move(void* from, std::size_t n, void* to, std::size_t m) noexcept {
        state& st = shared();
        std::lock_guard g(st.lock);
        auto* const b = static_cast<std::byte*>(from);
        auto* const t = static_cast<std::byte*>(to);
        backend::span* const target = st.arena_of(t);
        if (!target || target->base != t || target->bytes != m || target->contains(b))
            detail::fail("arena_source::move", "target is not a range of allocate_apart's", to);
        backend::span* arena = st.arena_of(b);
        backend::span* r = st.records.make(st.meta);   // `from` once it is free
        if (n == 0 || n > m || !arena || n > static_cast<std::size_t>(arena->end() - b) || !r ||
            !detail::one_mapping(b, n)) {
            if (r) st.records.recycle(r);
            st.refuse_target(target, true);   // untouched: still ours
            return false;
        }
        if (::mremap(from, n, m, MREMAP_MAYMOVE | MREMAP_FIXED, to) == MAP_FAILED) {
            st.records.recycle(r);
            st.refuse_target(target, detail::map_again(to, m));
            return false;
        }
        st.handed_out -= n;
        if (arena->base == b && arena->bytes == n) {   // an arena of its own: gone with its pages
            st.records.recycle(r);
            st.forget_arena(arena);
            return true;
        }
        // `from` is unmapped now. Mapped again, it is free space of its arena;
        // where that fails the addresses are the arena's no more: never
        // handed out, the arena never whole again, so never unmapped over
        // whoever took them.
        if (!detail::map_again(from, n)) {
            st.records.recycle(r);
            st.reserved -= n;
            return true;
        }
        st.take_back(r, b, n, arena);
        return true;
    }

    bool decommit(void* p, std::size_t n) noexcept { return ::madvise(p, n, MADV_DONTNEED) == 0; }

    // The `more` bytes after [p, p+n) when they are free in the same arena:
    // a large block's realloc then grows in place, where a copy would hold
    // the old and the new block at once (a block doubled to 64 MiB peaked at
    // twice glibc's resident set, which grows such a block with mremap).
    bool extend(void* p, std::size_t n, std::size_t more) noexcept {
        state& st = shared();
        std::lock_guard g(st.lock);
        auto* const b = static_cast<std::byte*>(p);
        backend::span* f = st.free.starting_at(b + n);
        if (!f || f->bytes < more || f->region != st.arena_of(b)) return false;
        st.free.take_front(f, more, [&st](backend::span* x) noexcept { st.records.recycle(x); });
        st.handed_out += more;
        return true;
    }

    // Process-wide figures (for tests and stats): address space reserved, and
    // bytes handed out to heaps now.
    static std::size_t reserved_bytes() noexcept {
        std::lock_guard g(shared().lock);
        return shared().reserved;
    }
    static std::size_t handed_out_bytes() noexcept {
        std::lock_guard g(shared().lock);
        return shared().handed_out;
    }

private:
    static void prefork(detail::fork_member*) noexcept { shared().lock.lock(); }
    static void postfork(detail::fork_member*) noexcept { shared().lock.unlock(); }

    // The arenas, and what the source adds: its mutex, the bytes handed out,
    // and its place in the fork guard.
    struct state : backend::arena_set {
        detail::os_mutex lock;
        std::size_t handed_out = 0;
        std::atomic<bool> fork_registered{false};
        detail::fork_member fork{nullptr, nullptr, &arena_source::prefork, &arena_source::postfork,
                                 &arena_source::postfork, false};

        void register_fork_handlers() noexcept {
            if (fork_registered.load(std::memory_order_acquire)) return;
            bool expected = false;
            // Set before joining: pthread_atfork may allocate, and that
            // allocation may come back here.
            if (fork_registered.compare_exchange_strong(expected, true, std::memory_order_acq_rel))
                detail::fork_guard::join(&fork, detail::fork_guard::sources);
        }
        // A move's target, refused: handed out no more, and unmapped where
        // its addresses are still ours.
        void refuse_target(backend::span* target, bool ours) noexcept {
            handed_out -= target->bytes;
            if (ours)
                unmap_arena(target);
            else
                forget_arena(target);
        }
    };

    static state& shared() noexcept { return detail::immortal<state>(); }
};

static_assert(source<arena_source> && decommitting_source<arena_source> && extending_source<arena_source> &&
              moving_source<arena_source>);

} // namespace allotheque
