// `locked<H, Mutex>`: one heap shared by threads behind a lock (Heap Layers'
// LockedHeap). Every operation, including the forwarded optional ones
// (deallocate(p), usable_size, deallocate_run, deallocate_all, trim, stats,
// last_allocation, owns, set_owner_tag), takes the lock
// for its whole duration, so the parent needs no thread safety of its own.
//
// Thread safety: every member may be called concurrently from any thread, except
// parent(), which hands out the unguarded parent (use with_lock for several
// operations under one acquisition). A block may be freed by any thread.
// Cost: one lock/unlock per call; no memory per block. Contention serialises
// all threads on one heap: see per_thread for the scalable alternative.
#pragma once
#include <cstddef>
#include <mutex>
#include <new>
#include <utility>

#include <allotheque/layers/heap_concept.hpp>
#include <allotheque/layers/layer.hpp>
#include <allotheque/request.hpp>

namespace allotheque::layers {

template <class H, class Mutex = std::mutex>
class locked : public layer<locked<H, Mutex>, H> {
    using base = layer<locked<H, Mutex>, H>;

public:
    using mutex_type = Mutex;
    using base::base;

    template <request_like R = request>
    [[nodiscard]] void* try_allocate(const R& r) noexcept {
        std::lock_guard g(mutex_);
        return this->parent_.try_allocate(r);
    }
    void deallocate(void* p, const request& r) noexcept {
        if (!p) return;
        std::lock_guard g(mutex_);
        this->parent_.deallocate(p, r);
    }
    void deallocate(void* p) noexcept
        requires has_unsized_deallocate<H>
    {
        if (!p) return;
        std::lock_guard g(mutex_);
        this->parent_.deallocate(p);
    }
    std::size_t usable_size(const void* p) const noexcept
        requires has_usable_size<H>
    {
        std::lock_guard g(mutex_);
        return this->parent_.usable_size(p);
    }
    void deallocate_run(void* const* ps, std::size_t n, const request& r) noexcept
        requires has_deallocate_run<H>
    {
        std::lock_guard g(mutex_);
        this->parent_.deallocate_run(ps, n, r);
    }
    void deallocate_all() noexcept
        requires has_deallocate_all<H>
    {
        std::lock_guard g(mutex_);
        this->parent_.deallocate_all();
    }
    std::size_t trim() noexcept
        requires has_trim<H>
    {
        std::lock_guard g(mutex_);
        return this->parent_.trim();
    }
    auto stats() const
        requires has_stats<H>
    {
        std::lock_guard g(mutex_);
        return this->parent_.stats();
    }
    const void* last_allocation() const noexcept
        requires has_last_allocation<H>
    {
        std::lock_guard g(mutex_);
        return this->parent_.last_allocation();
    }
    bool owns(const void* p) const noexcept
        requires has_owns<H>
    {
        std::lock_guard g(mutex_);
        return this->parent_.owns(p);
    }
    void set_owner_tag(const void* tag) noexcept
        requires has_owner<H>
    {
        std::lock_guard g(mutex_);
        this->parent_.set_owner_tag(tag);
    }

    // Runs f(parent) under the lock: several operations in one critical section.
    template <class F>
    decltype(auto) with_lock(F&& f) {
        std::lock_guard g(mutex_);
        return std::forward<F>(f)(this->parent_);
    }
    // parent() (from the base) hands out the parent without the lock: only
    // while no other thread uses this heap.

private:
    mutable Mutex mutex_;
};

} // namespace allotheque::layers
