// Blocks freed by threads other than their heap's owner, waiting for it: a
// lock-free multi-producer, single-consumer stack (Treiber). Any thread pushes
// with one compare-and-swap; the owner takes the whole list with one exchange
// and gives the blocks back to its heap. Used by layers::per_thread and the
// malloc replacement.
//
// An entry is either one block, the link threaded through it, or a batch: an
// array of blocks a freeing thread gathered (detail/remote_outbox.hpp). The
// owner reads a batch's addresses from the array instead of chasing links
// through blocks that another core wrote last, so its misses overlap instead
// of following one another (one such miss per block was most of a
// producer/consumer run's time). A batch's link carries a tag in bit 0.
//
// A block pushed alone starts with the link (and, for those who need it, one
// more word the pusher fills): it must be at least `record_bytes` long.
//
// Counted: pushed() counts the blocks pushed, for a user that reports them
// (layers::per_thread's remote_frees). The count is a second atomic
// read-modify-write on the list's cache line on every push, which the
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

// 512 bytes, aligned to that: eight cache lines the owner reads in order,
// and the end of `block` is the next 512-byte boundary (remote_outbox's test
// for a full batch).
struct alignas(512) remote_batch {
    static constexpr std::uint32_t capacity = 62;
    remote_record* next;   // the list's link, then a spare list's
    std::uint32_t count;
    std::uint32_t reserved;
    void* block[capacity];
};
static_assert(sizeof(remote_batch) == 512 && offsetof(remote_batch, block) + sizeof(void*) * remote_batch::capacity == 512);

// Batches not on any remote list (a pool's free ones, a thread's spares),
// stacked through their link word. One thread at a time.
class batch_stack {
public:
    void push(remote_batch* b) noexcept {
        b->next = reinterpret_cast<remote_record*>(top_);
        top_ = b;
    }
    remote_batch* pop() noexcept {
        remote_batch* b = top_;
        if (b) top_ = reinterpret_cast<remote_batch*>(b->next);
        return b;
    }
    bool empty() const noexcept { return top_ == nullptr; }
    void clear() noexcept { top_ = nullptr; }

private:
    remote_batch* top_ = nullptr;
};

template <bool Counted = false>
class remote_list {
public:
    using record = remote_record;
    static constexpr std::size_t record_bytes = sizeof(record);

    // p becomes a record carrying `word` (its first 16 bytes are overwritten),
    // to be pushed alone or in a batch.
    static void* make_record(void* p, std::uint64_t word) noexcept {
        if constexpr (poison::enabled) poison::expose(p, sizeof(record));   // a block's tail may be poisoned
        return ::new (p) record{nullptr, word};
    }
    // Any thread: one block (only its link is written).
    void push_link(void* p) noexcept {
        if constexpr (poison::enabled) poison::expose(p, sizeof(record*));
        link(static_cast<record*>(p), static_cast<record*>(p), 1);
    }
    // Any thread: a batch of b->count blocks, which the owner now holds.
    void push_batch(remote_batch* b) noexcept {
        link(reinterpret_cast<record*>(b), reinterpret_cast<record*>(reinterpret_cast<std::uintptr_t>(b) | 1), b->count);
    }

    // A cheap look, for the owner's slow path and for statistics (may miss a
    // push in flight).
    bool maybe_nonempty() const noexcept { return head_.load(std::memory_order_relaxed) != nullptr; }

    // Owner only: f(record*) for every block pushed so far, then done(batch)
    // for each batch once its blocks went to f. f may reuse the block's memory
    // (the next link is read before f is called). How many blocks.
    template <class F, class Done>
    std::size_t drain(F&& f, Done&& done) noexcept {
        std::size_t n = 0;
        take_all(
            [&](record* r) noexcept {
                f(r);
                ++n;
            },
            [&](remote_batch* b) noexcept {
                // The addresses are known up front, so the misses on the
                // blocks overlap. (A write prefetch 6 blocks ahead measured
                // no faster in threads_bench prodcons and server.) Newest
                // first, as single blocks come off the list.
                const std::uint32_t k = b->count;
                for (std::uint32_t i = k; i-- > 0;) f(static_cast<record*>(b->block[i]));
                n += k;
                done(b);
            });
        return n;
    }
    // Drops the blocks on the list (they go with their heap); done(batch) for
    // each batch, whose memory is the pusher's pool's.
    template <class Done>
    void clear(Done&& done) noexcept {
        take_all([](record*) noexcept {}, done);
    }

    std::size_t pushed() const noexcept
        requires Counted
    {
        return pushed_.load(std::memory_order_relaxed);
    }

private:
    // Empties the list: block(record*) for each single block, batch(b) for
    // each batch, newest first; each entry's link is read before its call.
    template <class Block, class Batch>
    void take_all(Block&& block, Batch&& batch) noexcept {
        record* r = head_.exchange(nullptr, std::memory_order_acquire);
        while (r) {
            const auto tagged = reinterpret_cast<std::uintptr_t>(r);
            if (tagged & 1) {
                auto* b = reinterpret_cast<remote_batch*>(tagged - 1);
                r = b->next;
                batch(b);
            } else {
                record* next = r->next;
                block(r);
                r = next;
            }
        }
    }
    // r (whose first word is the link) goes on top, as `entry` (r, tagged
    // when a batch); n blocks more to count.
    void link(record* r, record* entry, [[maybe_unused]] std::size_t n) noexcept {
        record* head = head_.load(std::memory_order_relaxed);
        do {
            *reinterpret_cast<record**>(r) = head;
        } while (!head_.compare_exchange_weak(head, entry, std::memory_order_release, std::memory_order_relaxed));
        if constexpr (Counted) pushed_.fetch_add(n, std::memory_order_relaxed);
    }

    std::atomic<record*> head_{nullptr};
    [[no_unique_address]] slot<Counted, std::atomic<std::size_t>> pushed_{};
};

} // namespace allotheque::detail
