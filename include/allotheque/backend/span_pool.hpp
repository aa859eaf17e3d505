// `span_pool<Source, Options>`: the reservation / growth stage of the back end.
// It asks the source for regions (growing with the heap: an eighth of what it
// holds, between min_growth and max_growth; a larger request gets a region of
// its own size), cuts them into spans on demand, and takes spans back:
//
//   take(bytes)   best fit among the free ranges (lowest address among equal
//                 sizes), split; a new region when nothing fits
//   give(span)    merged with free neighbours of the same region
//   extend(span)  grows a span into the free range right after it
//   move(span)    moves a region-sized span's pages to a larger new range
//
// Freed pages are kept for reuse up to a budget, max(retain_bytes, peak / 8),
// the peak being the most bytes in use over the last ten to twenty purge
// delays (10-20 s by default): that is the large-block cache. Pages beyond it
// are decommitted (oldest first, madvise, where the source can) once they
// have stayed free for purge_delay_ms, or at once past four times the
// budget, and regions that are entirely free go back to the source past
// that; trim() gives back everything free now.
// Span records come from a record_pool on the same source, so the heap's
// source sees every byte the heap uses and gets every byte back.
//
// One pool per heap, single-threaded like the heap (a shared, thread-safe
// source such as arena_source sits below it).
#pragma once
#include <time.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include <boost/intrusive/list.hpp>

#include <allotheque/backend/range_set.hpp>
#include <allotheque/backend/record_pool.hpp>
#include <allotheque/backend/span.hpp>
#include <allotheque/detail/bits.hpp>
#include <allotheque/detail/poison.hpp>
#include <allotheque/backend/span_provider.hpp>
#include <allotheque/heap_options.hpp>
#include <allotheque/sources/source.hpp>

namespace allotheque::backend {

// Milliseconds on a coarse monotonic clock (a few nanoseconds through the vDSO):
// enough to age free pages and space out reclaims.
inline std::uint64_t now_ms() noexcept {
    timespec ts;
    ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1000 + static_cast<std::uint64_t>(ts.tv_nsec) / 1000000;
}

template <source S, heap_options_like Options>
class span_pool {
    static constexpr heap_config cfg = config_of<Options>();
    using region_list = bi::list<span, bi::member_hook<span, span::list_hook, &span::by_age>,
                                 bi::constant_time_size<false>>;

public:
    using source_type = S;

    span_pool() requires std::default_initializable<S> = default;
    explicit span_pool(S s) : source_(std::move(s)) {}
    span_pool(const span_pool&) = delete;
    span_pool& operator=(const span_pool&) = delete;
    ~span_pool() { release_all(); }

    // A span of `bytes` (a multiple of the page size), or nullptr when the
    // source refuses. Its state is the caller's to set; `dirty` == 0 means its
    // pages read as zero.
    span* take(std::size_t bytes, const void* near = nullptr) noexcept {
        if (free_.dirty_bytes() > retain_bytes_) [[unlikely]] age();
        span* f = free_.best_fit(bytes);
        if (!f) {
            if (!grow(bytes, near)) return nullptr;
            f = free_.best_fit(bytes);
        }
        span* s = f;
        if (f->bytes == bytes) {
            free_.erase(f);
        } else {
            s = records_.make(source_);
            if (!s) return nullptr;
            s->base = f->base;
            s->bytes = bytes;
            s->region = f->region;
            s->dirty = f->dirty ? bytes : 0;
            free_.shrink_front(f, bytes);
        }
        s->state = span_state::small;   // anything but free: the caller refines it
        used(bytes);
        return s;
    }

    // Whether take(bytes) would be served without asking the source.
    bool can_take(std::size_t bytes) noexcept { return free_.best_fit(bytes) != nullptr; }

    // Takes back a span from take() (its pages may hold data).
    void give(span* s) noexcept {
        in_use_ -= s->bytes;
        s->owner = nullptr;
        s->chunk = 0;
        s->dirty = s->bytes;
        span* f = free_.insert(s, [this](span* r) noexcept { records_.recycle(r); });
        retain(f);
    }

    // Grows s in place to `bytes` when the free range right after it (same
    // region) has room, or, where s and that range end the region, when the
    // source can grow the region by what is missing (extending_source: a
    // large block that reached its region's end grows without a copy). The
    // new pages may hold data (dirty).
    bool extend(span* s, std::size_t bytes) noexcept {
        if (bytes <= s->bytes) return true;
        const std::size_t more = bytes - s->bytes;
        span* next = free_.starting_at(s->end());
        if (next && next->region != s->region) next = nullptr;
        const std::size_t have = next ? next->bytes : 0;
        if (have < more && !extend_region(s, next, more - have)) return false;
        if (next) free_.take_front(next, std::min(more, have), [this](span* r) noexcept { records_.recycle(r); });
        detail::poison::expose(s->end(), more);   // pages a block freed there may have left poisoned
        s->bytes = bytes;
        used(more);
        return true;
    }

    // A span that is a region of its own (a block of max_growth or more)
    // moved to `bytes` at new addresses, its pages moved rather than copied,
    // where the source can (moving_source: arena_source's mremap). Two steps,
    // so that the caller can record the new place first: plan_move takes the
    // new range from the source (nullptr: s does not move), move moves the
    // region's pages there (false: the source has taken the range back);
    // drop_move gives it back unused. The new range is exactly `bytes` (a
    // region the span fills, which it grows past by moving again): room to
    // spare after the span was free pages of the pool, and other spans took
    // them, after which neither could grow or move and each step copied.
    std::byte* plan_move(const span* s, std::size_t bytes) noexcept {
        if constexpr (moving_source<S>) {
            // Smaller blocks are copied: each move splits a mapping of the
            // kernel's, and the count of those is limited (vm.max_map_count).
            const span* const r = s->region;
            if (!r || s->base != r->base || s->bytes < cfg.max_growth || bytes <= r->bytes || !free_after(s))
                return nullptr;
            return static_cast<std::byte*>(source_.allocate_apart(bytes));
        } else {
            (void)s;
            (void)bytes;
            return nullptr;
        }
    }
    bool move(span* s, std::byte* to, std::size_t bytes) noexcept {
        if constexpr (moving_source<S>) {
            span* const r = s->region;
            // The whole region moves, the free pages after the span with it.
            if (!source_.move(r->base, r->bytes, to, bytes)) return false;
            if (span* rest = s->end() != r->end() ? free_.starting_at(s->end()) : nullptr) {
                free_.erase(rest);
                records_.recycle(rest);
            }
            detail::poison::expose(r->base, r->bytes);   // the next mapping there may be anybody's
            mapped(bytes - r->bytes);
            used(bytes - s->bytes);
            r->base = s->base = to;
            r->bytes = s->bytes = bytes;
            return true;
        } else {
            (void)s;
            (void)to;
            (void)bytes;
            return false;
        }
    }
    void drop_move(std::byte* to, std::size_t bytes) noexcept { source_.deallocate(to, bytes); }
    // Whether s ends its region, or the rest of its region is one free range
    // (the tail a shrink gave back): the region then moves whole.
    bool free_after(const span* s) noexcept {
        const span* const r = s->region;
        if (s->end() == r->end()) return true;
        const span* rest = free_.starting_at(s->end());
        return rest && rest->region == r && rest->end() == r->end();
    }

    // Gives the pages of s beyond `bytes` back (false: no record for the tail; s unchanged).
    bool shrink(span* s, std::size_t bytes) noexcept {
        if (bytes >= s->bytes) return true;
        span* tail = records_.make(source_);
        if (!tail) return false;
        tail->base = s->base + bytes;
        tail->bytes = s->bytes - bytes;
        tail->region = s->region;
        tail->state = span_state::small;
        s->bytes = bytes;
        give(tail);
        return true;
    }

    // Gives back every free page now: whole free regions to the source, the
    // rest decommitted where the source can. Returns the bytes given back.
    std::size_t trim() noexcept {
        const std::size_t before = given_back();
        release_free_regions(0);
        decommit_down_to(0);
        if (records_.live() == 0) records_.release_all(source_);   // nothing left to describe
        return given_back() - before;
    }
    // Bytes returned to the source or decommitted so far.
    std::size_t given_back() const noexcept { return returned_ + decommitted_; }

    // Every region back to the source (spans still handed out become invalid).
    void release_all() noexcept {
        while (span* f = free_.pop()) records_.recycle(f);
        while (!regions_.empty()) {
            span& r = regions_.front();
            regions_.pop_front();
            --region_count_;
            release_region_memory(r);
        }
        records_.release_all(source_);
        in_use_ = 0;
    }

    pool_stats stats() const noexcept {
        pool_stats st;
        st.os_bytes = os_bytes_;
        st.peak_os_bytes = peak_os_bytes_;
        st.in_use_bytes = in_use_;
        st.free_bytes = free_.bytes();
        st.resident_free_bytes = free_.dirty_bytes();
        st.returned_bytes = returned_;
        st.decommitted_bytes = decommitted_;
        st.metadata_bytes = records_.bytes();
        // Counters only, no list walk: the malloc reads the figures of other
        // threads' heaps without stopping them (malloc/stats.h).
        st.regions = region_count_;
        return st;
    }
    // Bytes of free pages the pool keeps for reuse before giving pages back.
    // The peak is recent, not the heap's all-time one: a program that peaked
    // at 1.5 GiB of large blocks and then held a few MiB kept 371 MiB
    // resident for as long as it ran, where glibc had given all of it back.
    std::size_t retain_budget() const noexcept {
        return std::max(retain_bytes_, std::max(in_use_peak_, in_use_peak_before_) / 8);
    }

    // heap_config::retain_bytes and purge_delay_ms, changed at run time (the
    // malloc's environment options); they apply from the next freed span.
    void set_retention(std::size_t retain_bytes, unsigned purge_delay_ms) noexcept {
        retain_bytes_ = retain_bytes;
        purge_delay_ms_ = purge_delay_ms;
    }

    S& source() noexcept { return source_; }
    const S& source() const noexcept { return source_; }

private:
    // s's region grown by the source by `missing` bytes, where s (and the
    // free range `next` after it) end the region; false where they do not or
    // the source cannot.
    bool extend_region(const span* s, const span* next, std::size_t missing) noexcept {
        if constexpr (extending_source<S>) {
            span* const r = s->region;
            if (!r || (next ? next->end() : s->end()) != r->end()) return false;
            if (!source_.extend(r->base, r->bytes, missing)) return false;
            r->bytes += missing;
            mapped(missing);
            return true;
        } else {
            (void)s;
            (void)next;
            (void)missing;
            return false;
        }
    }

    void used(std::size_t n) noexcept {
        in_use_ += n;
        in_use_peak_ = std::max(in_use_peak_, in_use_);
    }
    // The budget's peak covers the window that began at window_start_ and
    // the one before it: a window of ten purge delays.
    void roll_window(std::uint64_t now) noexcept {
        if (now - window_start_ < 10 * std::uint64_t{purge_delay_ms_}) return;
        in_use_peak_before_ = in_use_peak_;
        in_use_peak_ = in_use_;
        window_start_ = now;
    }

    // n more bytes from the source, a new region's or a region's growth.
    void mapped(std::size_t n) noexcept {
        os_bytes_ += n;
        peak_os_bytes_ = std::max(peak_os_bytes_, os_bytes_);
    }

    bool grow(std::size_t need, const void* near) noexcept {
        std::size_t want = need;
        if (need <= cfg.max_growth) {
            want = std::clamp(detail::round_up(os_bytes_ / 8, detail::page_size), cfg.min_growth, cfg.max_growth);
            want = std::max(want, need);
        }
        span* r = records_.make(source_);
        span* f = r ? records_.make(source_) : nullptr;
        if (!f) {
            if (r) records_.recycle(r);
            return false;
        }
        auto* base = static_cast<std::byte*>(source_.allocate(want, near));
        if (!base && want > need) base = static_cast<std::byte*>(source_.allocate(want = need, near));
        if (!base) {
            records_.recycle(f);
            records_.recycle(r);
            return false;
        }
        mapped(want);
        r->base = base;
        r->bytes = want;
        r->state = span_state::region;
        regions_.push_back(*r);
        ++region_count_;
        f->base = base;
        f->bytes = want;
        f->region = r;
        f->dirty = source_zeroed<S> ? 0 : want;
        free_.insert(f, [this](span* x) noexcept { records_.recycle(x); });
        return true;
    }

    // Free pages beyond the budget go back once they have stayed free for
    // purge_delay_ms, oldest first, or at once beyond four times the budget:
    // a heap that frees and takes again (a cycle, a churn of large blocks)
    // reuses its pages instead of giving them back and faulting them in again
    // (each madvise also costs every thread of the process a TLB flush).
    void retain(span* f) noexcept {
        const std::uint64_t now = now_ms();
        roll_window(now);
        const std::size_t budget = retain_budget();
        f->freed_at = now;
        const bool over = free_.dirty_bytes() > 4 * budget;
        if (over && covers_region(f)) release_region(f);
        // A region is whole again only at the moment its last piece comes
        // back: that is when to check (trim() looks at them all).
        if (!purge(budget, now, over) && covers_region(f) && free_.bytes() > 4 * budget) release_region(f);
    }
    // The same ageing where a heap past its peak takes spans and frees none
    // (it refills, or allocates large blocks it keeps).
    [[gnu::noinline, gnu::cold]] void age() noexcept {
        const std::uint64_t now = now_ms();
        roll_window(now);
        const std::size_t budget = retain_budget();
        purge(budget, now, free_.dirty_bytes() > 4 * budget);
    }
    // Free pages beyond the budget: all at once when `over` (four times
    // it), else those free for purge_delay_ms. False if none were beyond.
    bool purge(std::size_t budget, std::uint64_t now, bool over) noexcept {
        if (over) decommit_down_to(budget, now + 1);
        else if (free_.dirty_bytes() > budget) decommit_down_to(budget, now >= purge_delay_ms_ ? now - purge_delay_ms_ + 1 : 0);
        else return false;
        return true;
    }

    static bool covers_region(const span* f) noexcept {
        return f->region && f->base == f->region->base && f->bytes == f->region->bytes;
    }
    void release_region(span* f) noexcept {
        span* r = f->region;
        free_.erase(f);
        records_.recycle(f);
        regions_.erase(regions_.iterator_to(*r));
        --region_count_;
        release_region_memory(*r);
        records_.recycle(r);
    }
    void release_region_memory(span& r) noexcept {
        os_bytes_ -= r.bytes;
        returned_ += r.bytes;
        // The next mapping at these addresses may be anybody's.
        detail::poison::expose(r.base, r.bytes);
        source_.deallocate(r.base, r.bytes);
    }
    void release_free_regions(std::size_t budget) noexcept {
        span* whole[64];
        for (;;) {
            std::size_t k = 0;
            free_.for_each([&](span& f) {
                if (k < std::size(whole) && covers_region(&f)) whole[k++] = &f;
            });
            if (k == 0) return;
            for (std::size_t i = 0; i < k && free_.bytes() > budget; ++i) release_region(whole[i]);
            if (free_.bytes() <= budget || k < std::size(whole)) return;
        }
    }
    // Oldest free pages first (freed before `before`), while more than
    // `budget` bytes may be resident.
    void decommit_down_to(std::size_t budget, std::uint64_t before = ~std::uint64_t{0}) noexcept {
        if constexpr (decommitting_source<S>) {
            while (free_.dirty_bytes() > budget) {
                span* o = free_.oldest_dirty();
                if (o->freed_at >= before) return;
                if (covers_region(o)) {
                    release_region(o);
                    continue;
                }
                const std::size_t n = o->bytes;
                if (!source_.decommit(o->base, n)) return;
                decommitted_ += n;
                free_.mark_clean(o);
            }
        } else {
            (void)budget;
            (void)before;
        }
    }

    [[no_unique_address]] S source_{};
    range_set free_;
    region_list regions_;
    record_pool<span> records_;
    std::size_t os_bytes_ = 0, peak_os_bytes_ = 0, in_use_ = 0, returned_ = 0, decommitted_ = 0;
    std::size_t region_count_ = 0;
    std::size_t in_use_peak_ = 0, in_use_peak_before_ = 0;
    std::uint64_t window_start_ = 0;
    std::size_t retain_bytes_ = cfg.retain_bytes;
    unsigned purge_delay_ms_ = cfg.purge_delay_ms;
};

// The pool stage a heap with these options uses: Options::pool<S> where the
// options name one, else span_pool.
template <source S, heap_options_like Options>
struct pool_select {
    using type = span_pool<S, Options>;
};
template <source S, heap_options_like Options>
    requires requires { typename Options::template pool<S>; }
struct pool_select<S, Options> {
    using type = typename Options::template pool<S>;
};
template <source S, heap_options_like Options>
using pool_for = typename pool_select<S, Options>::type;

} // namespace allotheque::backend
