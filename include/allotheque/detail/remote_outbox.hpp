// A thread's frees of other threads' blocks, gathered into batches before
// they are handed over (snmalloc sends remote frees in batches too): a
// remote free is then a store into an array the freeing thread holds, and
// the owner's list (detail/remote_list.hpp) sees one compare-and-swap per
// batch instead of one per block, and reads the batch's addresses in order.
//
// remote_outbox: per thread heap, used only by the thread holding it. Up to
// `ways` owners have a batch filling at a time, each in the way its owner
// names (the registry numbers its slots in turn, so owners share a way only
// past `ways` heaps); a block for an owner whose way another holds posts
// that batch first. A batch goes to its owner when it holds `capacity`
// blocks, and whenever its thread flushes: at its allocations' slow path, at
// exit, and at collect()/trim. Blocks over max_block go alone, so at most
// ways * capacity * max_block bytes (4 MiB) wait in one thread's outbox.
// The spare batches drained batches leave behind are kept here too; new ones
// come from a detail::batch_pool.
#pragma once
#include <cstddef>
#include <cstdint>

#include <allotheque/detail/remote_list.hpp>

namespace allotheque::detail {

class remote_outbox {
public:
    static constexpr std::size_t ways = 64;
    static constexpr std::size_t max_block = 1024;
    static constexpr std::uint32_t kept_spares = 32;

    // Adds p (bytes long) for owner, whose way is `index` (< ways). The
    // outlet (a small value) says where batches and blocks go: o.post(owner,
    // batch) hands a batch over, o.supply() gives a batch when the spares are
    // out (nullptr if none), o.alone(owner, p, bytes) sends a block that cannot join
    // a batch (too large, or no batch to be had). Inline, this is two compares and a store
    // through the way's cursor; a batch is full when the cursor reaches its
    // end, the next 512-byte boundary. Everything else is a tail call out of
    // line, so that a free calling it needs no stack frame.
    template <class Outlet>
    [[gnu::always_inline]] void add(void* owner, std::size_t index, void* p, std::size_t bytes, Outlet o) noexcept {
        way& w = ways_[index];
        if (w.owner != owner || bytes > max_block) [[unlikely]]   // a way that holds no batch has no owner
            return start(w, owner, p, bytes, o);
        void** c = w.cursor;
        *c++ = p;
        w.cursor = c;
        if ((reinterpret_cast<std::uintptr_t>(c) & (sizeof(remote_batch) - 1)) == 0) [[unlikely]]
            return send(w, o);
    }

    // Hands every filling batch over (o.post).
    template <class Outlet>
    void flush(Outlet o) noexcept {
        if (filling_ == 0) return;
        for (way& w : ways_)
            if (w.owner) send(w, o);
    }
    bool empty() const noexcept { return filling_ == 0; }

    // A batch its owner drained: kept as a spare, or given to Overflow(batch)
    // when enough are kept.
    template <class Overflow>
    void keep(remote_batch* b, Overflow overflow) noexcept {
        if (spares_ >= kept_spares) return overflow(b);
        spare_.push(b);
        ++spares_;
    }
    // Every spare to f(batch) (the slot goes away).
    template <class F>
    void give_spares(F f) noexcept {
        while (remote_batch* b = take_spare()) f(b);
    }
    // Forgets every batch (their memory goes with the pool).
    void forget() noexcept { *this = remote_outbox{}; }

private:
    struct way {
        void* owner = nullptr;     // nullptr while the way holds no batch
        void** cursor = nullptr;   // the batch's next free entry
    };
    // The batch a cursor writes into (it is past the first entry).
    static remote_batch* batch_of(void** cursor) noexcept {
        return reinterpret_cast<remote_batch*>((reinterpret_cast<std::uintptr_t>(cursor) - 1) &
                                               ~(sizeof(remote_batch) - 1));
    }

    template <class Outlet>
    [[gnu::noinline]] void start(way& w, void* owner, void* p, std::size_t bytes, Outlet o) noexcept {
        if (bytes > max_block) return o.alone(owner, p, bytes);
        if (w.owner) send(w, o);
        remote_batch* b = take_spare();
        if (!b && !(b = o.supply())) return o.alone(owner, p, bytes);
        b->block[0] = p;
        w = {owner, &b->block[1]};
        ++filling_;
    }
    template <class Outlet>
    [[gnu::noinline]] void send(way& w, Outlet o) noexcept {
        remote_batch* b = batch_of(w.cursor);
        b->count = static_cast<std::uint32_t>(w.cursor - b->block);
        o.post(w.owner, b);
        w = {};
        --filling_;
    }
    remote_batch* take_spare() noexcept {
        remote_batch* b = spare_.pop();
        if (b) --spares_;
        return b;
    }

    way ways_[ways]{};
    batch_stack spare_;
    std::uint32_t spares_ = 0;
    std::uint32_t filling_ = 0;
};

} // namespace allotheque::detail
