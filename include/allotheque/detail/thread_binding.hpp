// Which heaps the calling thread holds, and what happens to them when it
// exits: the thread half of the per-thread machinery (detail/thread_registry.hpp),
// shared by every layers::per_thread object and the malloc replacement.
//
// A thread that takes a heap links it into its own list (the link lives in
// the heap's slot, so holding costs no allocation). One process-wide pthread
// key makes the thread's exit visible: its destructor runs after the thread's
// C++ thread_local destructors (which may still allocate through their
// heaps) and hands every held heap back to its registry. Destructors of keys
// that run after this one find the thread marked exited and borrow a heap for
// each call instead of holding one.
//
// Nothing here calls malloc: the list head and the flag are initial-exec TLS,
// the key is made once with pthread_once. (pthread_setspecific may allocate
// for keys past the first 32; the callers hold their heap before it runs.)
#pragma once
#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace allotheque::detail {

// The part of a heap's slot a holding thread links through.
struct held_link {
    held_link* next_held = nullptr;
    // The holder's exit: gives the slot back to its registry.
    void (*on_exit)(held_link*) noexcept = nullptr;
    // Which registry the slot belongs to (ids are never reused); 0 once the
    // registry is gone, when the holder unmaps the slot's memory itself.
    std::atomic<std::uint64_t> registry_id{0};
    void* mapping = nullptr;   // the slot: it starts its own mapping
    std::size_t mapped_bytes = 0;
};

class thread_binding {
public:
    // The calling thread's exit handlers ran: it holds nothing and takes nothing more.
    static bool exited() noexcept { return exited_; }

    // Links a slot the calling thread just took. False when no key can be made
    // (the slot then goes back at once).
    static bool hold(held_link* l) noexcept {
        if (!ensure_key()) return false;
        l->next_held = head_;
        head_ = l;
        if (!key_set_) {
            key_set_ = true;
            ::pthread_setspecific(key_, &key_);   // any non-null value: the destructor runs
        }
        return true;
    }
    // Unlinks a slot the calling thread holds (no-op when it does not).
    static void unhold(held_link* l) noexcept {
        for (held_link** at = &head_; *at; at = &(*at)->next_held)
            if (*at == l) {
                *at = l->next_held;
                l->next_held = nullptr;
                return;
            }
    }
    // The calling thread's slot of registry `id`, or nullptr.
    static held_link* find(std::uint64_t id) noexcept {
        for (held_link* l = head_; l; l = l->next_held)
            if (l->registry_id.load(std::memory_order_relaxed) == id) return l;
        return nullptr;
    }
    static bool holds(const held_link* l) noexcept {
        for (const held_link* h = head_; h; h = h->next_held)
            if (h == l) return true;
        return false;
    }
    // Unmaps the slots of registries that are gone (retired), so a thread that
    // outlives many per_thread objects does not keep their memory.
    template <class Unmap>
    static void drop_retired(Unmap unmap) noexcept {
        for (held_link** at = &head_; *at;) {
            held_link* l = *at;
            if (l->registry_id.load(std::memory_order_acquire) == 0) {
                *at = l->next_held;
                unmap(l->mapping, l->mapped_bytes);
            } else {
                at = &l->next_held;
            }
        }
    }

    // Registry ids: unique for the life of the process.
    static std::uint64_t next_id() noexcept { return ids_.fetch_add(1, std::memory_order_relaxed) + 1; }

    // A per-thread counter the remote-free path samples (one in N pushes
    // services an orphan).
    static unsigned& pushes() noexcept { return pushes_; }

private:
    static void make_key() noexcept { key_ok_ = ::pthread_key_create(&key_, &at_exit) == 0; }
    static bool ensure_key() noexcept {
        ::pthread_once(&key_once_, &make_key);
        return key_ok_;
    }
    static void at_exit(void*) noexcept {
        exited_ = true;
        while (held_link* l = head_) {
            head_ = l->next_held;
            l->next_held = nullptr;
            l->on_exit(l);
        }
    }

    static inline constinit thread_local held_link* head_ [[gnu::tls_model("initial-exec")]] = nullptr;
    static inline constinit thread_local bool exited_ [[gnu::tls_model("initial-exec")]] = false;
    static inline constinit thread_local bool key_set_ [[gnu::tls_model("initial-exec")]] = false;
    static inline constinit thread_local unsigned pushes_ [[gnu::tls_model("initial-exec")]] = 0;
    static inline constinit pthread_once_t key_once_ = PTHREAD_ONCE_INIT;
    static inline pthread_key_t key_;
    static inline constinit bool key_ok_ = false;
    static inline constinit std::atomic<std::uint64_t> ids_{0};
};

} // namespace allotheque::detail
