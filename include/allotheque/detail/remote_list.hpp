// Blocks freed by threads other than their heap's owner, waiting for it: a
// lock-free multi-producer, single-consumer stack (Treiber) threaded through
// the freed blocks themselves. Any thread pushes with one compare-and-swap;
// the owner takes the whole list with one exchange and gives the blocks back
// to its heap. Used by layers::per_thread and the malloc replacement.
//
// A block on the list starts with the link (and, for those who need it, one
// more word the pusher fills): it must be at least `record_bytes` long.
//
// Counted: pushed() counts the pushes, for a user that reports them
// (layers::per_thread's remote_frees). The count is a second atomic
// read-modify-write on the list's cache line on every remote free, which the
// malloc, reporting nothing, does not pay.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>

#include <allotheque/detail/poison.hpp>
#include <allotheque/detail/slot.hpp>

namespace allotheque::detail {

struct remote_record {
    remote_record* next;
    std::uint64_t word;   // the pusher's: e.g. the request size
};

template <bool Counted = false>
class remote_list {
public:
    using record = remote_record;
    static constexpr std::size_t record_bytes = sizeof(record);

    // Any thread. p becomes a record (its first 16 bytes are overwritten).
    void push(void* p, std::uint64_t word = 0) noexcept {
        if constexpr (poison::enabled) poison::expose(p, sizeof(record));   // a block's tail may be poisoned
        link(::new (p) record{nullptr, word});
    }
    // Only the link, for blocks too small for a record's second word.
    void push_link(void* p) noexcept {
        if constexpr (poison::enabled) poison::expose(p, sizeof(record*));
        link(static_cast<record*>(p));
    }

    // A cheap look, for the owner's slow path and for statistics (may miss a
    // push in flight).
    bool maybe_nonempty() const noexcept { return head_.load(std::memory_order_relaxed) != nullptr; }

    // Owner only: f(record*) for every block pushed so far, newest first. f may
    // reuse the block's memory (the next link is read before f is called).
    template <class F>
    std::size_t drain(F&& f) noexcept {
        record* r = head_.exchange(nullptr, std::memory_order_acquire);
        std::size_t n = 0;
        while (r) {
            record* next = r->next;
            f(r);
            r = next;
            ++n;
        }
        return n;
    }
    // Drops whatever is on the list (the blocks go with their heap).
    void clear() noexcept { head_.store(nullptr, std::memory_order_relaxed); }

    std::size_t pushed() const noexcept
        requires Counted
    {
        return pushed_.load(std::memory_order_relaxed);
    }

private:
    // r's link (its first word, all push_link may write) goes on top.
    void link(record* r) noexcept {
        record* head = head_.load(std::memory_order_relaxed);
        do {
            *reinterpret_cast<record**>(r) = head;
        } while (!head_.compare_exchange_weak(head, r, std::memory_order_release, std::memory_order_relaxed));
        if constexpr (Counted) pushed_.fetch_add(1, std::memory_order_relaxed);
    }

    std::atomic<record*> head_{nullptr};
    [[no_unique_address]] slot<Counted, std::atomic<std::size_t>> pushed_{};
};

} // namespace allotheque::detail
