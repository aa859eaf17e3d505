// The process-wide thread heaps of a declared malloc (malloc/runtime.hpp):
// the per-thread machinery of detail/thread_registry.hpp (registry, adoption
// at thread exit, remote frees, fork), the same layers::per_thread uses,
// with malloc's fast path in front of it.
//
// Threads: every thread allocates from its own heap, with no lock. Ownership
// is the span's owner tag in the page map (backend/page_map.hpp), so free(p)
// looks the span up: a block of the calling thread's heap goes straight back;
// any other goes into the batch the freeing thread fills for its owner, one
// CAS onto the owner's remote-free list per 62 blocks
// (detail/remote_outbox.hpp), which the owner drains at its next allocation
// that misses its heap's lists.
//
// Set-up never calls malloc before the thread's heap exists: the thread's
// heap is a plain initial-exec TLS pointer, heaps live in mmap'd slots, and
// the registry's lock is never held across an allocation.
#pragma once
#include <atomic>
#include <cstddef>

#include <allotheque/detail/free_marks.hpp>
#include <allotheque/detail/thread_registry.hpp>
#include <allotheque/malloc/declaration.hpp>
#include <allotheque/malloc/glibc_heap.hpp>
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

    // The registry's hooks (detail/thread_registry.hpp).
    struct policy;
    using registry_type = detail::thread_registry<heap_type, policy, malloc_counts_remote_frees<D>>;
    using thread_heap = typename registry_type::slot;

    static inline constinit thread_local thread_heap* tl_heap [[gnu::tls_model("initial-exec")]] = nullptr;
    // Set while the thread's heap is being made (attach's re-entry guard).
    static inline constinit thread_local bool tl_attaching [[gnu::tls_model("initial-exec")]] = false;

    struct policy {
        static constexpr std::size_t kept_orphans = 8;   // empty heaps beyond these are destroyed at thread exit
        // The owner takes back what other threads freed (the remote mark
        // goes). free checked each block before it queued it, so neither the
        // block nor its mark is checked again.
        static void give_back(heap_type& h, detail::remote_record* r) noexcept {
            if constexpr (block_heap) {
                marks::word(r) = 0;
                // Its state and tags were checked by free; its extent is
                // deallocate(p, span)'s to check.
                h.deallocate(r, heap_type::span_of_block(r));
            } else {
                h.deallocate_queued(r, heap_type::span_of_block(r));
            }
        }
        static void prepare(heap_type& h) noexcept {
            if constexpr (requires { h.set_retention(settings_.retain_bytes, settings_.purge_delay_ms); })
                h.set_retention(settings_.retain_bytes, settings_.purge_delay_ms);
        }
        static void attached(thread_heap& th) noexcept { tl_heap = &th; }
        // Key destructors that run after the thread's exit may still allocate:
        // they find it exited (thread_binding) and borrow a heap for each call.
        static void detached(thread_heap& th) noexcept {
            if (tl_heap == &th) tl_heap = nullptr;
        }
        static std::size_t trim(heap_type& h) noexcept { return h.trim(); }
        static void release_pages(heap_type& h) noexcept { h.release_free_pages(); }
        // No memory a block could be in: no thread can reach it any more.
        static bool holds_nothing(const heap_type& h) noexcept {
            const heap_stats st = h.stats();
            return st.small_span_bytes == 0 && st.large_blocks == 0;
        }
    };

    static void drain_pending(thread_heap* th) noexcept { registry_type::drain_pending(th); }
    static bool pending(const thread_heap* th) noexcept { return registry_type::pending(th); }
    // See thread_registry::borrow.
    template <class F>
    static void* borrow(F f) noexcept {
        ensure_started();
        return registry.borrow(f);
    }

    static void ensure_started() noexcept {
        if (started.load(std::memory_order_acquire)) return;
        pthread_mutex_lock(&start_lock);
        if (!started.load(std::memory_order_relaxed)) {
            detail::glibc_heap::note_start();
            read_settings();
            started.store(true, std::memory_order_release);
        }
        pthread_mutex_unlock(&start_lock);
    }

    // The calling thread's heap, made or adopted; nullptr when there is no
    // memory for one, or when called again from inside (an exception thrown
    // while the heap is built allocates): that inner call gets NULL, never a
    // wait on a lock.
    [[gnu::noinline, gnu::cold]] static thread_heap* attach() noexcept {
        if (tl_attaching) return nullptr;
        tl_attaching = true;
        ensure_started();
        thread_heap* th = registry.attach();   // sets tl_heap before anything that may allocate
        tl_attaching = false;
        return th;
    }

    // A block (bytes long) of another thread's heap, marked remote: into the
    // calling thread's batch for its owner, or onto the owner's list.
    [[gnu::always_inline]] static void hand_over(thread_heap* owner, void* p, std::size_t bytes) noexcept {
        // Read again rather than kept from free's owner test: kept, it takes
        // a register and an instruction on every local free.
        thread_heap* th = __atomic_load_n(&tl_heap, __ATOMIC_RELAXED);
        if (!th) [[unlikely]]
            return hand_over_first(owner, p, bytes);
        registry_type::hand_over(th, owner, p, bytes);
    }
    // A thread's first free of another thread's block, before it allocated
    // anything: it gets a heap, so that its frees go in batches too (a
    // thread that only consumes what others allocate would otherwise pay a
    // CAS per block). After the thread's exit, or with no memory for a heap,
    // the block goes alone.
    [[gnu::noinline, gnu::cold]] static void hand_over_first(thread_heap* owner, void* p, std::size_t bytes) noexcept {
        thread_heap* th = detail::thread_binding::exited() ? nullptr : attach();
        registry_type::hand_over(th, owner, p, bytes);
    }

    // glibc's malloc_trim: the caller's heap and every orphaned one give their
    // free pages back, and orphans left holding nothing are destroyed. Returns
    // 1 when anything went back.
    static int trim_all() noexcept { return registry.trim_all(tl_heap) > 0; }

    // The environment's options (malloc/settings.hpp), read once at the first
    // heap; before that, the heap's configured values.
    static const malloc_settings& settings() noexcept { return settings_; }

    // f(const thread_heap&) for every heap, under the registry lock (f must not allocate).
    template <class F>
    static void for_each_heap(F f) noexcept {
        registry.for_each([&](const thread_heap& h) noexcept { f(h); });
    }

private:
    static inline constinit registry_type registry{};
    static inline constinit pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
    static inline constinit std::atomic<bool> started{false};
    static constexpr heap_config heap_cfg = config_of<typename heap_type::options>();
    static inline constinit malloc_settings settings_{.retain_bytes = heap_cfg.retain_bytes,
                                                      .purge_delay_ms = heap_cfg.purge_delay_ms};

    // Under start_lock, once.
    static void read_settings() noexcept {
        settings_ = read_malloc_settings(heap_cfg.retain_bytes, heap_cfg.purge_delay_ms);
        if (settings_.verbose)
            detail::text_out(2) << "allotheque malloc: heap " << D::name << ", retain_bytes "
                                << settings_.retain_bytes << ", purge_delay_ms " << settings_.purge_delay_ms
                                << ", show_stats " << (settings_.show_stats ? "1" : "0") << "\n";
    }
};

} // namespace allotheque
