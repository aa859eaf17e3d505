// `locked<H, Mutex>`: one heap shared by threads behind a lock (Heap Layers'
// LockedHeap). Every operation, including the forwarded optional ones
// (deallocate_all, stats, last_allocation, owns, deallocate_run), takes the lock
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

#include <allotheque/detail/throwing_allocate.hpp>
#include <allotheque/layers/heap_concept.hpp>
#include <allotheque/request.hpp>

namespace allotheque::layers {

template <class H, class Mutex = std::mutex>
class locked : public detail::throwing_allocate<locked<H, Mutex>> {
    static_assert(heap<H>,
                  "allotheque::layers::locked<H>: H does not satisfy allotheque::layers::heap (needs allocate(r), "
                  "try_allocate(r), deallocate(p, r), good_size(n, a) and H::max_alignment)");

public:
    using parent_type = H;
    using mutex_type = Mutex;
    static constexpr std::size_t max_alignment = H::max_alignment;
    static constexpr std::size_t granularity = granularity_of<H>;
    static constexpr bool locality_aware = locality_aware_of<H>;

    locked() = default;
    template <class... Args>
    explicit locked(std::in_place_t, Args&&... args) : parent_(std::forward<Args>(args)...) {}
    locked(const locked&) = delete;
    locked& operator=(const locked&) = delete;

    std::size_t good_size(std::size_t n, std::size_t a = 0) const noexcept {
        return parent_.good_size(n, a);   // a pure function of its arguments in every heap: no lock
    }

    template <request_like R = request>
    [[nodiscard]] void* try_allocate(const R& r) noexcept {
        std::lock_guard g(mutex_);
        return parent_.try_allocate(r);
    }
    void deallocate(void* p, const request& r) noexcept {
        if (!p) return;
        std::lock_guard g(mutex_);
        parent_.deallocate(p, r);
    }

    void deallocate_run(void* const* ps, std::size_t n, const request& r) noexcept
        requires has_deallocate_run<H>
    {
        std::lock_guard g(mutex_);
        parent_.deallocate_run(ps, n, r);
    }
    void deallocate_all() noexcept
        requires has_deallocate_all<H>
    {
        std::lock_guard g(mutex_);
        parent_.deallocate_all();
    }
    auto stats() const
        requires has_stats<H>
    {
        std::lock_guard g(mutex_);
        return parent_.stats();
    }
    const void* last_allocation() const noexcept
        requires has_last_allocation<H>
    {
        std::lock_guard g(mutex_);
        return parent_.last_allocation();
    }
    bool owns(const void* p) const noexcept
        requires has_owns<H>
    {
        std::lock_guard g(mutex_);
        return parent_.owns(p);
    }

    // Runs f(parent) under the lock: several operations in one critical section.
    template <class F>
    decltype(auto) with_lock(F&& f) {
        std::lock_guard g(mutex_);
        return std::forward<F>(f)(parent_);
    }
    // The parent without the lock: only while no other thread uses this heap.
    H& parent() noexcept { return parent_; }
    const H& parent() const noexcept { return parent_; }

private:
    mutable Mutex mutex_;
    H parent_;
};

} // namespace allotheque::layers
