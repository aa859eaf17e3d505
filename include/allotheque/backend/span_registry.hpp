// `span_registry<Source, Options>`: the last stage of the back end, the one a
// heap talks to. It takes spans from the span pool, records them in the
// process's page map (so any pointer into a span finds it: free(p) without a
// size, usable_size, the owning heap, a foreign or interior pointer refused),
// keeps the list of spans the heap holds, and undoes all of that when a span
// goes back.
//
// A span cut into chunks has every page recorded (any chunk must find it). A
// large block's span records at most its first MiB (a layer that keeps a
// header just before an aligned pointer inside the block, like
// layers::sized, must find it there) and the pages holding the payload's
// first byte and the 16 bytes before it (block_heap's tags). Its other pages
// map to nothing, so an interior pointer there is refused like a foreign one,
// and a block of any size costs O(1) page-map work and memory: a 64 GiB block
// once wrote 16 M entries (128 MiB resident) and a 64 TiB one exhausted memory.
//
//   source  ->  span_pool (regions, free ranges, retention)  ->  span_registry (page map, spans held)
//
// The pool stage is any span_provider (span_provider.hpp): span_pool unless
// the heap's options name another (`template <source S> using pool = …`).
//
// Both heap kinds (exact-size `heap`, splitting `block_heap`) sit on it, so no
// span bookkeeping is written twice.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>

#include <boost/intrusive/list.hpp>

#include <allotheque/backend/page_map.hpp>
#include <allotheque/backend/span.hpp>
#include <allotheque/backend/span_pool.hpp>
#include <allotheque/backend/span_provider.hpp>
#include <allotheque/detail/bits.hpp>
#include <allotheque/detail/poison.hpp>
#include <allotheque/heap_options.hpp>
#include <allotheque/sources/source.hpp>

namespace allotheque::backend {

// How much of a large block the page map records from its start (see the
// top): a pointer a layer hands out inside a large block must keep what it
// reads before itself within this much of the block's start.
inline constexpr std::size_t large_recorded_head = std::size_t{1} << 20;

template <source S, heap_options_like Options>
class span_registry {
    using span_list = bi::list<span, bi::member_hook<span, span::list_hook, &span::by_age>, bi::constant_time_size<false>>;
    static constexpr std::size_t pages(std::size_t bytes) noexcept { return bytes / detail::page_size; }

public:
    using pool_type = pool_for<S, Options>;
    static_assert(check_span_provider<pool_type>());

    span_registry() requires std::default_initializable<S> = default;
    explicit span_registry(S s) : pool_(std::move(s)) {}
    span_registry(const span_registry&) = delete;
    span_registry& operator=(const span_registry&) = delete;
    ~span_registry() { release_all(); }

    // A span of `bytes` in state st, held by `owner`, every page recorded; or
    // nullptr when the source refuses or the page map cannot record it (then
    // nothing is held).
    span* open(std::size_t bytes, const void* hint, span_state st, const void* owner) noexcept {
        span* sp = pool_.take(bytes, hint);
        if (!sp) return nullptr;
        sp->state = st;
        sp->owner = owner;
        sp->clear_in_use();   // here, not in the pool: any pool stage may hand out a span
        if (st == span_state::large) sp->chunk = 0;   // open_large sets the payload
        if (!record(sp)) {
            pool_.give(sp);
            return nullptr;
        }
        held_.push_back(*sp);
        ++count_[index(st)];
        bytes_[index(st)] += bytes;
        detail::poison::expose(sp->base, sp->bytes);   // whatever its last holder left poisoned
        return sp;
    }
    // A large block's span: its payload at the first address from base +
    // min_offset aligned to `alignment` (0 or a power of two), recorded in
    // sp->chunk; nullptr as open().
    span* open_large(std::size_t bytes, const void* hint, const void* owner, std::size_t min_offset,
                     std::size_t alignment) noexcept {
        span* sp = pool_.take(bytes, hint);
        if (!sp) return nullptr;
        sp->state = span_state::large;
        sp->owner = owner;
        sp->clear_in_use();
        const std::uintptr_t first = detail::address_of(sp->base) + min_offset;
        sp->chunk = static_cast<std::uint32_t>((alignment > 1 ? detail::round_up(first, alignment) : first) -
                                               detail::address_of(sp->base));
        if (!record(sp)) {
            pool_.give(sp);
            return nullptr;
        }
        held_.push_back(*sp);
        ++count_[index(span_state::large)];
        bytes_[index(span_state::large)] += bytes;
        detail::poison::expose(sp->base, sp->bytes);
        return sp;
    }
    // Gives sp back to the pool (its pages no longer map to anything).
    void close(span* sp) noexcept {
        unrecord(sp);
        held_.erase(held_.iterator_to(*sp));
        --count_[index(sp->state)];
        bytes_[index(sp->state)] -= sp->bytes;
        pool_.give(sp);
    }
    // Grows sp in place into the free pages after it, or gives its tail back.
    bool resize(span* sp, std::size_t bytes) noexcept {
        if (sp->state == span_state::large) return resize_large(sp, bytes);
        const std::size_t was = sp->bytes;
        if (bytes > was) {
            if (!pool_.extend(sp, bytes)) return false;
            if (!page_map::instance().set(sp->base + was, pages(bytes - was), sp)) {
                pool_.shrink(sp, was);
                return false;
            }
        } else if (bytes < was) {
            page_map::instance().clear(sp->base + bytes, pages(was - bytes));
            if (!pool_.shrink(sp, bytes)) {   // no record for the tail: keep it
                page_map::instance().set(sp->base + bytes, pages(was - bytes), sp);
                return true;
            }
        }
        bytes_[index(sp->state)] += sp->bytes;
        bytes_[index(sp->state)] -= was;
        return true;
    }
    // Moves sp, a large block's span that is a region of its own, to `bytes`
    // at new addresses without copying its pages (span_pool::move; false
    // where it cannot, sp unchanged): the page map records the new place
    // before the pages move, and forgets the old one after.
    bool move(span* sp, std::size_t bytes) noexcept {
        if constexpr (requires { pool_.plan_move(sp, bytes); }) {
            if (sp->state != span_state::large) return false;
            std::byte* const to = pool_.plan_move(sp, bytes);
            if (!to) return false;
            std::byte* const from = sp->base;
            const std::size_t was = sp->bytes;
            const auto place = [sp](std::byte* b, std::size_t n) noexcept {
                sp->base = b;
                sp->bytes = n;
            };
            place(to, bytes);
            const bool recorded = record(sp);
            place(from, was);
            if (!recorded) {
                pool_.drop_move(to, bytes);
                return false;
            }
            if (!pool_.move(sp, to, bytes)) {
                place(to, bytes);
                unrecord(sp);
                place(from, was);
                return false;
            }
            place(from, was);
            unrecord(sp);
            place(to, bytes);
            bytes_[index(span_state::large)] += bytes - was;
            return true;
        } else {
            (void)sp;
            (void)bytes;
            return false;
        }
    }
    // Every span back to the source (what they held becomes invalid).
    void release_all() noexcept {
        for (span& sp : held_) unrecord(&sp);
        held_.clear();
        for (auto& c : count_) c = 0;
        for (auto& b : bytes_) b = 0;
        pool_.release_all();
    }
    // Every span back to the pool (kept for reuse or given back by its policy).
    void close_all() noexcept {
        while (!held_.empty()) close(&held_.front());
    }
    void retag(const void* owner) noexcept {
        for (span& sp : held_) sp.owner = owner;
    }
    template <class F>
    void for_each(F&& f) {
        for (span& sp : held_) f(sp);
    }

    std::size_t count(span_state st) const noexcept { return count_[index(st)]; }
    std::size_t bytes(span_state st) const noexcept { return bytes_[index(st)]; }
    pool_type& pool() noexcept { return pool_; }
    const pool_type& pool() const noexcept { return pool_; }

private:
    static constexpr std::size_t index(span_state st) noexcept { return static_cast<std::size_t>(st); }

    // f(first, pages) for each run of pages sp records (see the top).
    static constexpr std::size_t large_head = large_recorded_head;
    template <class F>
    static bool for_recorded(const span* sp, F f) noexcept {
        if (sp->state != span_state::large) return f(sp->base, pages(sp->bytes));
        const std::size_t head = pages(sp->bytes < large_head ? sp->bytes : large_head);
        const std::uintptr_t base = detail::address_of(sp->base), payload = base + sp->chunk;
        const std::uintptr_t lo = (sp->chunk >= 16 ? payload - 16 : base) & ~(detail::page_size - 1);
        const std::uintptr_t hi = payload & ~(detail::page_size - 1);
        const std::uintptr_t head_end = base + head * detail::page_size;
        if (hi < head_end) return f(sp->base, head);
        if (lo < head_end) return f(sp->base, (hi - base) / detail::page_size + 1);
        return f(sp->base, head) && f(reinterpret_cast<std::byte*>(lo), (hi - lo) / detail::page_size + 1);
    }
    // A large span's recorded pages depend on its length (the head is capped
    // by it): record again around the change. The new record needs at most
    // the page-map leaves the old one or the grown pages need; if they cannot
    // be had, the span keeps its length.
    bool resize_large(span* sp, std::size_t bytes) noexcept {
        const std::size_t was = sp->bytes;
        if (bytes == was) return true;
        unrecord(sp);
        const bool changed = bytes > was ? pool_.extend(sp, bytes) : pool_.shrink(sp, bytes);
        if (changed && !record(sp)) {
            bytes > was ? pool_.shrink(sp, was) : pool_.extend(sp, was);
            record(sp);
            return false;
        }
        if (!changed) {
            record(sp);
            return bytes < was;   // a shrink with no record for the tail keeps it, as above
        }
        bytes_[index(span_state::large)] += sp->bytes - was;
        return true;
    }
    // False when the page map cannot record sp; then no entry of sp is left.
    static bool record(span* sp) noexcept {
        if (for_recorded(sp, [sp](std::byte* p, std::size_t n) noexcept { return page_map::instance().set(p, n, sp); }))
            return true;
        unrecord(sp);
        return false;
    }
    static void unrecord(const span* sp) noexcept {
        for_recorded(sp, [](std::byte* p, std::size_t n) noexcept {
            page_map::instance().clear(p, n);
            return true;
        });
    }

    pool_type pool_{};
    span_list held_;
    std::size_t count_[6] = {}, bytes_[6] = {};   // per span_state
};

} // namespace allotheque::backend
