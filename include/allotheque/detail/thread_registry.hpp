// thread_registry<H, Policy>: the heaps of one per-thread allocator, one per
// thread, shared by layers::per_thread and the malloc replacement
// (malloc/thread_heaps.hpp). Each heap sits in a slot of its own mapping
// with its remote-free list (detail/remote_list.hpp) and its outbox of frees
// of other slots' blocks (detail/remote_outbox.hpp); the slot is the heap's
// owner tag, so free(p) finds it through the page map.
//
// Life of a slot: a thread takes one (an orphan if any waits, else a new
// one) and holds it until it exits (detail/thread_binding.hpp); then the heap
// takes back its remote frees, trims, and becomes an orphan for the next new
// thread to adopt, so thread churn does not grow the registry beyond the peak
// number of live threads. Empty orphans beyond Policy::kept_orphans are
// destroyed. Frees that keep arriving for an orphan are given back by the
// threads that push them, now and then (service_orphan), so nothing piles up.
// A slot's memory is never returned while its registry lives: a thread that
// pushed a remote free may still read the slot's `orphaned` flag.
//
// The lock guards the list of slots and spare memory, and is never held across
// anything that can allocate or throw (a heap whose tables cannot be mapped
// throws bad_alloc, which malloc's exception handling would bring back here).
// Fork: detail/fork_guard.hpp.
//
// Policy (static members): give_back(H&, remote_record*) returns a
// remotely freed block to the heap; prepare(H&) runs once a new heap exists;
// attached(slot&) / detached(slot&) tell the front end the calling thread now
// holds / no longer holds the slot; trim(H&) at thread exit;
// release_pages(H&) after an orphan took back the frees pushed to it (its
// free pages to the system, without a sweep); holds_nothing(const H&):
// whether an orphan may be destroyed; kept_orphans.
// CountsRemote: for a front end that reports remote frees.
#pragma once
#include <pthread.h>
#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <utility>

#include <allotheque/detail/batch_pool.hpp>
#include <allotheque/detail/bits.hpp>
#include <allotheque/detail/fork_guard.hpp>
#include <allotheque/detail/mapped_array.hpp>
#include <allotheque/detail/remote_list.hpp>
#include <allotheque/detail/remote_outbox.hpp>
#include <allotheque/detail/thread_binding.hpp>

namespace allotheque::detail {

template <class H, class Policy, bool CountsRemote = false>
class thread_registry : private fork_member {
public:
    // A front end that reports remote frees has them counted (remote_list's Counted).
    using remote_type = remote_list<CountsRemote>;
    // The heap comes first: the fast paths reach it at the slot's address.
    struct slot {
        H heap;
        remote_type remote;
        remote_outbox out;   // the holder's only
        std::atomic<bool> orphaned{false};   // no thread holds it: adoptable
        bool abandoned = false;              // a thread that did not survive fork() held it
        slot* next_all = nullptr;
        thread_registry* registry = nullptr;
        std::uint32_t way = 0;   // its way in other slots' outboxes (< remote_outbox::ways)
        held_link link;   // link.mapping is the slot itself
    };

    constexpr thread_registry() noexcept
        : fork_member{nullptr, nullptr, &prefork, &postfork_parent, &postfork_child, false} {}
    thread_registry(const thread_registry&) = delete;
    thread_registry& operator=(const thread_registry&) = delete;

    std::uint64_t id() noexcept {
        std::uint64_t i = id_.load(std::memory_order_acquire);
        if (i != 0) return i;
        const std::uint64_t fresh = thread_binding::next_id();
        return id_.compare_exchange_strong(i, fresh, std::memory_order_acq_rel) ? fresh : i;
    }

    // The calling thread's slot of this registry, or nullptr.
    slot* held() noexcept {
        held_link* l = thread_binding::find(id());
        return l ? static_cast<slot*>(l->mapping) : nullptr;
    }

    // A slot for the calling thread to hold until it exits: adopted or new.
    // nullptr when there is no memory for one, or when the thread has exited.
    slot* attach() noexcept {
        if (thread_binding::exited()) return nullptr;
        thread_binding::drop_retired(&unmap);
        slot* s = take();
        if (!s) return nullptr;
        s->link.registry_id.store(id(), std::memory_order_release);
        Policy::attached(*s);   // before anything below may allocate
        drain(s);
        if (!thread_binding::hold(&s->link)) {
            Policy::detached(*s);
            release(s);
            return nullptr;
        }
        fork_guard::join(this, fork_guard::registries);
        return s;
    }

    // For a thread that has exited (a later pthread key's destructor): f(slot&)
    // on an orphan taken for the one call, or on a new slot that becomes one;
    // f's result, or nullptr when no slot can be had. Out of line: rare, and
    // kept off the callers' fast paths.
    template <class F>
    [[gnu::noinline, gnu::cold]] void* borrow(F f) noexcept {
        slot* s = take();
        if (!s) return nullptr;
        drain(s);
        void* p = f(*s);
        release(s);
        return p;
    }

    // The holder (or a thread that took s) gives every remotely freed block
    // back; the batches they came in become s's spares.
    [[gnu::always_inline]] static void drain(slot* s) noexcept {
        s->remote.drain([s](remote_record* r) noexcept { Policy::give_back(s->heap, r); },
                        [s](remote_batch* b) noexcept { recycle(s, b); });
    }
    // Quiescent: s's pending remote frees and the frees it gathered are
    // dropped (their heaps drop every block).
    static void drop_remote(slot* s) noexcept {
        s->remote.clear([s](remote_batch* b) noexcept { recycle(s, b); });
        struct dropping {
            slot* s;
            void post(void*, remote_batch* b) const noexcept { recycle(s, b); }
        };
        s->out.flush(dropping{s});
    }
    // From an allocation's slow path, which runs often: two loads when
    // nothing is pending instead of drain's exchange (a locked instruction).
    // The holder's own gathered frees go to their owners first, so none waits
    // longer than the thread's next slow path. The work is out of line: the
    // slow paths that call this are inlined into every entry point.
    [[gnu::always_inline]] static void drain_pending(slot* s) noexcept {
        if (pending(s)) [[unlikely]]
            settle(s);
    }
    // Frees s's holder gathered for others, or others handed it, may wait.
    [[gnu::always_inline]] static bool pending(const slot* s) noexcept {
        return !s->out.empty() || s->remote.maybe_nonempty();
    }
    // The holder of s hands the frees it gathered over, then takes back what
    // others handed it: what collect, trim and thread exit do.
    [[gnu::noinline]] static void settle(slot* s) noexcept {
        flush(s);
        drain(s);
    }
    // The holder of s hands the frees it gathered over to their owners.
    static void flush(slot* s) noexcept { s->out.flush(outlet{s}); }

    // A thread frees p, a block of owner's heap (bytes long), prepared for
    // Policy::give_back: it goes into the batch for owner that `from` (the
    // caller's slot, or nullptr when it holds none) is filling, or alone
    // onto owner's list. from and owner are slots of one registry: a batch's
    // memory is its registry's, which may go first.
    [[gnu::always_inline]] static void hand_over(slot* from, slot* owner, void* p, std::size_t bytes) noexcept {
        if (!from) [[unlikely]]
            return push_alone(owner, p, bytes);
        from->out.add(owner, owner->way, p, bytes, outlet{from});
    }

    // glibc's malloc_trim: the caller's slot and every orphan give their free
    // pages back, and orphans left holding nothing are destroyed. How many
    // bytes went back (at least 1 for each destroyed orphan).
    std::size_t trim_all(slot* mine) noexcept {
        std::size_t back = 0;
        if (mine) {
            settle(mine);
            back += Policy::trim(mine->heap);
        }
        pthread_mutex_lock(&lock_);
        for (slot* h = all_; h;) {
            slot* next = h->next_all;
            bool expected = true;
            if (!h->abandoned && h->orphaned.compare_exchange_strong(expected, false, std::memory_order_acq_rel)) {
                drain(h);
                back += Policy::trim(h->heap);
                if (empty(h)) {
                    --orphans_;
                    destroy_locked(h);
                    ++back;
                } else {
                    h->orphaned.store(true, std::memory_order_release);
                }
            }
            h = next;
        }
        pthread_mutex_unlock(&lock_);
        return back;
    }

    // f(slot&) for every slot, under the lock (f must not allocate through this registry).
    template <class F>
    void for_each(F&& f) noexcept(noexcept(f(std::declval<slot&>()))) {
        pthread_mutex_lock(&lock_);
        struct unlock {
            pthread_mutex_t* m;
            ~unlock() { pthread_mutex_unlock(m); }
        } g{&lock_};
        for (slot* h = all_; h; h = h->next_all) f(*h);
    }

    // The owner of the registry goes away (quiescent: no thread uses it). Every
    // heap is destroyed; slots no live thread holds are unmapped now, the others
    // by their holders (at exit, or at their next attach to any registry).
    void retire() noexcept {
        fork_guard::leave(this, fork_guard::registries);
        pthread_mutex_lock(&lock_);
        for (slot* h = all_; h;) {
            slot* next = h->next_all;
            const bool holder_lives = !h->orphaned.load(std::memory_order_acquire) && !h->abandoned;
            h->remote.clear([](remote_batch*) noexcept {});   // those blocks go with the heap, the batches with the pool
            h->out.forget();
            const bool mine = thread_binding::holds(&h->link);
            if (mine) thread_binding::unhold(&h->link);
            void* m = h->link.mapping;
            h->heap.~H();
            h->remote.~remote_type();
            if (holder_lives && !mine)
                h->link.registry_id.store(0, std::memory_order_release);   // the holder unmaps it
            else
                unmap(m, slot_bytes);
            h = next;
        }
        all_ = nullptr;
        orphans_ = 0;
        pthread_mutex_lock(&pool_lock_);
        pool_.release_all();
        pthread_mutex_unlock(&pool_lock_);
        while (spare_) {
            spare_slot* next = spare_->next;
            unmap(spare_, slot_bytes);
            spare_ = next;
        }
        pthread_mutex_unlock(&lock_);
    }

private:
    // An orphan taken over by the caller, or a new slot linked in; nullptr when
    // no memory is left for one. The caller gives it back with release().
    slot* take() noexcept {
        pthread_mutex_lock(&lock_);
        for (slot* h = all_; h; h = h->next_all) {
            bool expected = true;
            if (!h->abandoned && h->orphaned.compare_exchange_strong(expected, false, std::memory_order_acq_rel)) {
                --orphans_;
                pthread_mutex_unlock(&lock_);
                return h;
            }
        }
        pthread_mutex_unlock(&lock_);
        slot* s = make();
        if (!s) return nullptr;
        pthread_mutex_lock(&lock_);
        s->next_all = all_;
        all_ = s;
        pthread_mutex_unlock(&lock_);
        return s;
    }

    // The caller stops holding s: it becomes an orphan, or is destroyed when
    // it holds nothing and enough orphans wait already.
    void release(slot* s) noexcept {
        pthread_mutex_lock(&lock_);
        if (orphans_ >= Policy::kept_orphans && empty(s)) {
            destroy_locked(s);
        } else {
            ++orphans_;
            s->orphaned.store(true, std::memory_order_release);
        }
        pthread_mutex_unlock(&lock_);
    }

    static constexpr std::size_t slot_bytes = round_up(sizeof(slot), page_size);

    struct spare_slot {
        spare_slot* next;
    };

    static void unmap(void* m, std::size_t n) noexcept { ::munmap(m, n); }

    // Whether a slot held by the caller holds no memory a block could be in:
    // then no thread can reach it through the page map any more.
    static bool empty(slot* s) noexcept { return Policy::holds_nothing(s->heap) && !s->remote.maybe_nonempty(); }

    // A batch from the pool, or nullptr when no memory is left for one.
    remote_batch* take_batch() noexcept {
        pthread_mutex_lock(&pool_lock_);
        remote_batch* b = pool_.take();
        pthread_mutex_unlock(&pool_lock_);
        return b;
    }
    void give_batch(remote_batch* b) noexcept {
        pthread_mutex_lock(&pool_lock_);
        pool_.give(b);
        pthread_mutex_unlock(&pool_lock_);
    }
    static void recycle(slot* s, remote_batch* b) noexcept {
        s->out.keep(b, [s](remote_batch* x) noexcept { s->registry->give_batch(x); });
    }
    // Where a slot's outbox sends (remote_outbox::add).
    struct outlet {
        slot* from;
        // A batch onto its owner's list.
        static void post(void* owner, remote_batch* b) noexcept {
            auto* s = static_cast<slot*>(owner);
            const std::uint32_t n = b->count;
            s->remote.push_batch(b);
            if (s->orphaned.load(std::memory_order_relaxed)) service_orphan(s, n);
        }
        remote_batch* supply() const noexcept { return from->registry->take_batch(); }
        static void alone(void* owner, void* p, std::size_t bytes) noexcept {
            push_alone(static_cast<slot*>(owner), p, bytes);
        }
    };
    [[gnu::noinline]] static void push_alone(slot* owner, void* p, std::size_t bytes) noexcept {
        owner->remote.push_link(p);
        if (owner->orphaned.load(std::memory_order_relaxed))
            service_orphan(owner, bytes >= orphan_service_bytes ? orphan_service_blocks : 1);
    }

    // Frees keep arriving for a heap whose thread exited and that no new
    // thread adopted yet: the threads that push them take the heap for a
    // moment, once per 64 blocks pushed or at once for a block of 64 KiB or
    // more, give the blocks back to it and give its free pages to the
    // system. Nothing would reuse them before a new thread adopts the heap,
    // and no call of its own would purge them: eight exited threads' 8 MiB
    // blocks freed by the main thread kept 1.3 GiB resident, until
    // malloc_trim, while the main thread mapped as much again.
    // Out of line: the remote-free path that calls it stays a leaf.
    static constexpr unsigned orphan_service_blocks = 64;
    static constexpr std::size_t orphan_service_bytes = 64 * 1024;
    [[gnu::noinline, gnu::cold]] static void service_orphan(slot* s, unsigned blocks) noexcept {
        unsigned& pushed = thread_binding::pushes();
        pushed += blocks;
        if (pushed < orphan_service_blocks) return;
        pushed = 0;
        bool expected = true;
        if (s->abandoned || !s->orphaned.compare_exchange_strong(expected, false, std::memory_order_acq_rel)) return;
        drain(s);
        Policy::release_pages(s->heap);
        s->orphaned.store(true, std::memory_order_release);
    }

    // A slot built in m, or nullptr where a table of its heap could not be
    // mapped: bad_alloc, or without exceptions mapped_array's flag.
    static slot* construct(void* m) noexcept {
#if __cpp_exceptions
        try {
            return ::new (m) slot();
        } catch (...) {
            return nullptr;
        }
#else
        bool failed = false;
        mapping_failed = &failed;
        slot* s = ::new (m) slot();
        mapping_failed = nullptr;
        if (!failed) return s;
        s->~slot();
        return nullptr;
#endif
    }

    // A new slot, outside the lock (H's constructor may map tables).
    slot* make() noexcept {
        void* m = nullptr;
        pthread_mutex_lock(&lock_);
        if (spare_) {
            m = spare_;
            spare_ = spare_->next;
        }
        pthread_mutex_unlock(&lock_);
        if (!m) {
            m = ::mmap(nullptr, slot_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (m == MAP_FAILED) return nullptr;
        }
        slot* s = construct(m);
        if (!s) {   // the heap's tables could not be mapped
            pthread_mutex_lock(&lock_);
            auto* sp = static_cast<spare_slot*>(m);
            sp->next = spare_;
            spare_ = sp;
            pthread_mutex_unlock(&lock_);
            return nullptr;
        }
        s->link.on_exit = &at_thread_exit;
        s->link.mapping = m;
        s->link.mapped_bytes = slot_bytes;
        s->registry = this;
        s->way = next_way_.fetch_add(1, std::memory_order_relaxed) % remote_outbox::ways;
        s->heap.set_owner_tag(s);
        Policy::prepare(s->heap);
        return s;
    }

    // Under the lock, with s held by the caller and empty: unlinks and
    // destroys it, keeping its memory for the next slot.
    void destroy_locked(slot* s) noexcept {
        for (slot** link = &all_; *link; link = &(*link)->next_all)
            if (*link == s) {
                *link = s->next_all;
                break;
            }
        s->out.give_spares([this](remote_batch* b) noexcept { give_batch(b); });
        s->~slot();
        // What a late reader of `orphaned` sees: all zero, not adoptable.
        std::memset(static_cast<void*>(s), 0, sizeof(slot));
        auto* sp = reinterpret_cast<spare_slot*>(s);
        sp->next = spare_;
        spare_ = sp;
    }

    // The holder exits (thread_binding): the heap takes back its remote frees,
    // trims and goes to the orphans; a slot whose registry is gone is unmapped.
    static void at_thread_exit(held_link* l) noexcept {
        if (l->registry_id.load(std::memory_order_acquire) == 0) {
            unmap(l->mapping, l->mapped_bytes);
            return;
        }
        auto* s = static_cast<slot*>(l->mapping);
        Policy::detached(*s);
        settle(s);
        Policy::trim(s->heap);
        s->registry->release(s);
    }

    static void prefork(fork_member* m) noexcept {
        auto* r = owner_of(m);
        pthread_mutex_lock(&r->lock_);
        pthread_mutex_lock(&r->pool_lock_);
    }
    static void postfork_parent(fork_member* m) noexcept {
        pthread_mutex_unlock(&owner_of(m)->pool_lock_);
        pthread_mutex_unlock(&owner_of(m)->lock_);
    }
    // Only the forking thread exists now: heaps other threads were holding may
    // be mid-update and are never touched again (their blocks leak in the child).
    static void postfork_child(fork_member* m) noexcept {
        auto* r = owner_of(m);
        pthread_mutex_init(&r->lock_, nullptr);
        pthread_mutex_init(&r->pool_lock_, nullptr);
        for (slot* h = r->all_; h; h = h->next_all)
            if (!h->orphaned.load(std::memory_order_relaxed) && !thread_binding::holds(&h->link)) h->abandoned = true;
    }
    static thread_registry* owner_of(fork_member* m) noexcept { return static_cast<thread_registry*>(m); }

    pthread_mutex_t lock_ = PTHREAD_MUTEX_INITIALIZER;
    slot* all_ = nullptr;              // under lock_
    std::size_t orphans_ = 0;          // under lock_
    spare_slot* spare_ = nullptr;      // under lock_
    pthread_mutex_t pool_lock_ = PTHREAD_MUTEX_INITIALIZER;   // taken after lock_, never before
    batch_pool pool_;                                        // under pool_lock_
    std::atomic<std::uint64_t> id_{0};
    std::atomic<std::uint32_t> next_way_{0};
};

} // namespace allotheque::detail
