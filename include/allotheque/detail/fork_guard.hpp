// fork() with thread heaps: one set of pthread_atfork handlers for the
// process takes every lock the allocator's memory passes through before fork
// and settles them after it in both processes. Members join in one of two
// tiers, locked in order: `registries` (the per-thread machinery's,
// detail/thread_registry.hpp: in the child, heaps that threads which did not
// survive were using are abandoned, as they may be mid-update), then
// `sources` (arena_source), whose lock a registry's work may take while it
// holds its own. One order for every lock means no fork can deadlock on them.
//
// A member joins on first use (pthread_atfork may allocate: registries join
// after the calling thread holds its heap) and may leave (a retired registry).
// The list's own lock comes before every member's.
#pragma once
#include <pthread.h>

namespace allotheque::detail {

struct fork_member {
    fork_member* next = nullptr;
    fork_member* prev = nullptr;
    void (*prefork)(fork_member*) noexcept = nullptr;
    void (*postfork_parent)(fork_member*) noexcept = nullptr;
    void (*postfork_child)(fork_member*) noexcept = nullptr;
    bool joined = false;   // under the list's lock
};

class fork_guard {
public:
    enum tier : unsigned { registries = 0, sources = 1 };

    static void join(fork_member* m, tier t) noexcept {
        ::pthread_mutex_lock(&lock_);
        if (!m->joined) {
            m->joined = true;
            m->prev = nullptr;
            m->next = head_[t];
            if (head_[t]) head_[t]->prev = m;
            head_[t] = m;
        }
        const bool first = !registered_;
        registered_ = true;
        ::pthread_mutex_unlock(&lock_);
        if (first) ::pthread_atfork(&prepare, &parent, &child);
    }
    static void leave(fork_member* m, tier t) noexcept {
        ::pthread_mutex_lock(&lock_);
        if (m->joined) {
            if (m->prev)
                m->prev->next = m->next;
            else
                head_[t] = m->next;
            if (m->next) m->next->prev = m->prev;
            m->joined = false;
        }
        ::pthread_mutex_unlock(&lock_);
    }

private:
    static void prepare() noexcept {
        ::pthread_mutex_lock(&lock_);
        for (fork_member* h : head_)
            for (fork_member* m = h; m; m = m->next) m->prefork(m);
    }
    static void parent() noexcept {
        for (fork_member* h : head_)
            for (fork_member* m = h; m; m = m->next) m->postfork_parent(m);
        ::pthread_mutex_unlock(&lock_);
    }
    static void child() noexcept {
        for (fork_member* h : head_)
            for (fork_member* m = h; m; m = m->next) m->postfork_child(m);
        ::pthread_mutex_init(&lock_, nullptr);
    }

    static inline constinit pthread_mutex_t lock_ = PTHREAD_MUTEX_INITIALIZER;
    static inline constinit fork_member* head_[2] = {nullptr, nullptr};
    static inline constinit bool registered_ = false;
};

} // namespace allotheque::detail
