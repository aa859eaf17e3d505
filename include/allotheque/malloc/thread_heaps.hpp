// The process-wide thread heaps of a declared malloc (malloc/runtime.hpp):
// one heap per thread, a registry of them, adoption at thread exit, the
// remote-free lists and fork.
//
// Threads: every thread allocates from its own heap, with no lock. Ownership
// is the span's owner tag in the page map (backend/page_map.hpp), so free(p)
// looks the span up: a block of the calling thread's heap goes straight back;
// any other is pushed onto its owner's remote-free list (one CAS,
// detail/remote_list.hpp), which the owner drains at its next allocation.
// When a thread exits (pthread key destructor), its heap drains, trims and is
// marked orphaned; the next new thread adopts it, and frees that keep arriving
// for it are collected by the threads that push them (service_orphan), so
// nothing leaks and late cross-thread frees stay valid.
//
// Set-up never calls malloc before the thread's heap exists: thread state is a
// plain initial-exec TLS pointer and a pthread key, heaps live in mmap'd
// slots. Fork: the registry lock and the arena lock are taken before fork and
// released in both processes; in the child, the heaps of threads that did not
// survive the fork are never used again (their state may be mid-update).
#pragma once
#include <pthread.h>
#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <cstring>
#include <new>

#include <allotheque/detail/bits.hpp>
#include <allotheque/detail/free_marks.hpp>
#include <allotheque/detail/remote_list.hpp>
#include <allotheque/malloc/declaration.hpp>
#include <allotheque/malloc/settings.hpp>

namespace allotheque {

template <malloc_declaration D>
class malloc_threads {
public:
    using heap_type = typename D::heap;
    static constexpr bool block_heap = block_malloc_heap<heap_type>;
    // Where a freed block carries its mark. Word 0 is the remote link: Lea's
    // blocks take the next word, an exact heap's mark lies past its links.
    using marks = typename detail::malloc_marks<heap_type>::type;
    static_assert(marks::offset >= 8, "allotheque malloc: the remote link takes word 0 of a freed block");

    struct thread_heap {
        heap_type heap;
        detail::remote_list remote;
        std::atomic<bool> orphaned{false};   // no thread uses it: adoptable
        bool abandoned = false;              // a thread that did not survive fork() held it
        thread_heap* next_all = nullptr;
    };

    // Where the calling thread is in its life, for the slow paths.
    enum class thread_state : unsigned char { fresh, attaching, attached, exited };
    static inline constinit thread_local thread_heap* tl_heap [[gnu::tls_model("initial-exec")]] = nullptr;
    static inline constinit thread_local thread_state tl_state [[gnu::tls_model("initial-exec")]] =
        thread_state::fresh;

    // The owner takes back what other threads freed (clearing the remote mark).
    static void drain(thread_heap* th) noexcept {
        th->remote.drain([th](detail::remote_list::record* r) noexcept {
            marks::word(r) = 0;
            if constexpr (block_heap)
                th->heap.deallocate(r);
            else
                th->heap.deallocate(r, *heap_type::span_of_any(r));
        });
    }

    // An orphan taken over by the caller, or a new heap linked in; nullptr when
    // no memory is left for one.
    static thread_heap* take_heap() noexcept {
        pthread_mutex_lock(&registry_lock);
        for (thread_heap* h = all_heaps; h; h = h->next_all) {
            bool expected = true;
            if (!h->abandoned && h->orphaned.compare_exchange_strong(expected, false, std::memory_order_acq_rel)) {
                --orphan_count;
                pthread_mutex_unlock(&registry_lock);
                return h;
            }
        }
        pthread_mutex_unlock(&registry_lock);
        thread_heap* th = make_heap();
        if (!th) return nullptr;
        pthread_mutex_lock(&registry_lock);
        th->next_all = all_heaps;
        all_heaps = th;
        pthread_mutex_unlock(&registry_lock);
        return th;
    }

    // Gives a heap the caller holds to the pool of orphans, or destroys it when
    // it holds nothing and enough orphans wait already.
    static void release_heap(thread_heap* th) noexcept {
        pthread_mutex_lock(&registry_lock);
        if (orphan_count >= kept_orphans && holds_nothing(th)) {
            destroy_locked(th);
        } else {
            ++orphan_count;
            th->orphaned.store(true, std::memory_order_release);
        }
        pthread_mutex_unlock(&registry_lock);
    }

    static void ensure_started() noexcept {
        if (started.load(std::memory_order_acquire) != 0) return;
        pthread_mutex_lock(&registry_lock);
        if (started.load(std::memory_order_relaxed) == 0) {
            read_settings();
            arena_source::fork_handled_externally();
            if (pthread_key_create(&exit_key, on_thread_exit) == 0) started.store(1, std::memory_order_release);
        }
        pthread_mutex_unlock(&registry_lock);
    }

    // The calling thread's heap, made or adopted; nullptr when there is no
    // memory for one, or when called again from inside (an exception thrown
    // while the heap is built allocates): that inner call gets NULL, never a
    // wait on a lock.
    [[gnu::noinline, gnu::cold]] static thread_heap* attach() noexcept {
        if (tl_state == thread_state::attaching) return nullptr;
        const thread_state was = tl_state;
        tl_state = thread_state::attaching;
        ensure_started();
        thread_heap* th = started.load(std::memory_order_acquire) != 0 ? take_heap() : nullptr;
        if (!th) {
            tl_state = was;
            return nullptr;
        }
        tl_heap = th;
        drain(th);
        pthread_setspecific(exit_key, th);   // may allocate (keys past the first 32): tl_heap is set
        int expected = 1;
        if (started.compare_exchange_strong(expected, 2, std::memory_order_acq_rel))
            pthread_atfork(&before_fork, &after_fork_parent, &after_fork_child);   // may allocate too
        tl_state = thread_state::attached;
        return th;
    }

    // Frees keep arriving for a heap whose thread exited and that no new thread
    // adopted yet: the threads that push them take the heap for a moment, now
    // and then, and give the blocks back to it.
    static void service_orphan(thread_heap* owner) noexcept {
        if (++orphan_pushes % 64 != 0) return;
        bool expected = true;
        if (owner->abandoned || !owner->orphaned.compare_exchange_strong(expected, false, std::memory_order_acq_rel))
            return;
        drain(owner);
        owner->orphaned.store(true, std::memory_order_release);
    }

    // glibc's malloc_trim: the caller's heap and every orphaned one give their
    // free pages back, and orphans left holding nothing are destroyed. Returns
    // 1 when anything went back.
    static int trim_all() noexcept {
        std::size_t back = 0;
        if (thread_heap* th = tl_heap) {
            drain(th);
            back += th->heap.trim();
        }
        pthread_mutex_lock(&registry_lock);
        for (thread_heap* h = all_heaps; h;) {
            thread_heap* next = h->next_all;
            bool expected = true;
            if (!h->abandoned && h->orphaned.compare_exchange_strong(expected, false, std::memory_order_acq_rel)) {
                drain(h);
                back += h->heap.trim();
                if (holds_nothing(h)) {
                    --orphan_count;
                    destroy_locked(h);
                    ++back;
                } else {
                    h->orphaned.store(true, std::memory_order_release);
                }
            }
            h = next;
        }
        pthread_mutex_unlock(&registry_lock);
        return back > 0;
    }

    // The environment's options (malloc/settings.hpp), read once at the first
    // heap; before that, the heap's configured values.
    static const malloc_settings& settings() noexcept { return settings_; }

    // f(const thread_heap&) for every heap, under the registry lock (f must not allocate).
    template <class F>
    static void for_each_heap(F f) noexcept {
        pthread_mutex_lock(&registry_lock);
        for (thread_heap* h = all_heaps; h; h = h->next_all) f(static_cast<const thread_heap&>(*h));
        pthread_mutex_unlock(&registry_lock);
    }

private:
    static constexpr std::size_t thread_heap_bytes = detail::round_up(sizeof(thread_heap), detail::page_size);
    // Empty orphans beyond this many are destroyed when their thread exits (a
    // burst of threads leaves no trail of heaps); malloc_trim destroys them all.
    static constexpr std::size_t kept_orphans = 8;

    // Memory of destroyed heaps, kept for the next one: a thread that pushed a
    // remote free may still read the heap's `orphaned` flag after its owner was
    // drained, emptied and destroyed, so that memory stays mapped (and reads as
    // a heap that is not orphaned) for the life of the process.
    struct spare_slot {
        spare_slot* next;
    };

    // The registry lock guards the list of heaps and the spare slots, and is
    // never held across anything that can allocate or throw: a heap whose
    // tables cannot be mapped throws bad_alloc, whose exception is allocated
    // with malloc, which would come back here for the lock.
    static inline constinit pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
    static inline constinit thread_heap* all_heaps = nullptr;   // under registry_lock
    static inline constinit std::size_t orphan_count = 0;       // under registry_lock
    static inline constinit spare_slot* spare_slots = nullptr;  // under registry_lock
    static inline pthread_key_t exit_key;
    static inline constinit std::atomic<int> started{0};   // 0: nothing, 1: key made, 2: fork handlers registered
    static inline constinit thread_local unsigned orphan_pushes [[gnu::tls_model("initial-exec")]] = 0;
    static constexpr heap_config heap_cfg = config_of<typename heap_type::options>();
    static inline constinit malloc_settings settings_{.retain_bytes = heap_cfg.retain_bytes,
                                                      .purge_delay_ms = heap_cfg.purge_delay_ms};

    // Under registry_lock, once.
    static void read_settings() noexcept {
        settings_ = read_malloc_settings(heap_cfg.retain_bytes, heap_cfg.purge_delay_ms);
        if (settings_.verbose)
            detail::text_out(2) << "allotheque malloc: heap " << D::name << ", retain_bytes "
                                << settings_.retain_bytes << ", purge_delay_ms " << settings_.purge_delay_ms
                                << ", show_stats " << (settings_.show_stats ? "1" : "0") << "\n";
    }

    // Whether a heap held by the caller holds no memory a block could be in:
    // then no thread can find it through the page map any more.
    static bool holds_nothing(thread_heap* th) noexcept {
        const heap_stats st = th->heap.stats();
        return st.small_span_bytes == 0 && st.large_blocks == 0 && !th->remote.maybe_nonempty();
    }

    static void before_fork() noexcept {
        pthread_mutex_lock(&registry_lock);
        arena_source::prefork();
    }
    static void after_fork_parent() noexcept {
        arena_source::postfork();
        pthread_mutex_unlock(&registry_lock);
    }
    static void after_fork_child() noexcept {
        arena_source::postfork();
        pthread_mutex_init(&registry_lock, nullptr);
        // Only the forking thread exists now: heaps other threads were using may
        // be mid-update and are never touched again (their blocks leak in the child).
        for (thread_heap* h = all_heaps; h; h = h->next_all)
            if (h != tl_heap && !h->orphaned.load(std::memory_order_relaxed)) h->abandoned = true;
    }

    // A new heap, outside the registry lock (its constructor maps tables and
    // may throw); linked in by the caller.
    static thread_heap* make_heap() noexcept {
        void* m = nullptr;
        pthread_mutex_lock(&registry_lock);
        if (spare_slots) {
            m = spare_slots;
            spare_slots = spare_slots->next;
        }
        pthread_mutex_unlock(&registry_lock);
        if (!m) {
            m = ::mmap(nullptr, thread_heap_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (m == MAP_FAILED) return nullptr;
        }
        thread_heap* th = nullptr;
        try {
            th = ::new (m) thread_heap();
        } catch (...) {   // the heap's tables could not be mapped
            pthread_mutex_lock(&registry_lock);
            auto* slot = static_cast<spare_slot*>(m);
            slot->next = spare_slots;
            spare_slots = slot;
            pthread_mutex_unlock(&registry_lock);
            return nullptr;
        }
        th->heap.set_owner_tag(th);
        if constexpr (requires { th->heap.set_retention(settings_.retain_bytes, settings_.purge_delay_ms); })
            th->heap.set_retention(settings_.retain_bytes, settings_.purge_delay_ms);
        return th;
    }

    // Under registry_lock, with th held by the caller (not orphaned) and
    // holding nothing: unlinks and destroys it, keeping its memory.
    static void destroy_locked(thread_heap* th) noexcept {
        for (thread_heap** link = &all_heaps; *link; link = &(*link)->next_all)
            if (*link == th) {
                *link = th->next_all;
                break;
            }
        th->~thread_heap();
        // What a late reader of `orphaned` sees: all zero, not adoptable.
        std::memset(static_cast<void*>(th), 0, sizeof(thread_heap));
        auto* slot = reinterpret_cast<spare_slot*>(th);
        slot->next = spare_slots;
        spare_slots = slot;
    }

    // A thread's heap goes to the pool of orphans when its thread exits. Key
    // destructors that run after this one may still allocate: they borrow a
    // heap for each call (tl_state = exited), so none is left tied to a dead
    // thread.
    static void on_thread_exit(void* v) noexcept {
        auto* th = static_cast<thread_heap*>(v);
        if (tl_heap == th) tl_heap = nullptr;
        tl_state = thread_state::exited;
        drain(th);
        th->heap.trim();
        release_heap(th);
    }
};

} // namespace allotheque
