// `heap<Partition, Source, Options>`: owns a partition's root and the system
// memory behind it. Single-threaded by design; thread safety is a layer.
//
// allocate: round the size to the chunk size that serves it (good_size), look
// in the partition, and when nothing fits refill: carve a fresh span into chunks
// of that size, return the first and give the rest to the partition. Requests
// above the large threshold go straight to the source. Deallocation is sized:
// the size given at allocation is rounded the same way and the chunk returns to
// every class it belongs to. Destruction returns all system memory.
//
// Guarantees: a block of good_size(n, a) bytes, aligned to `a` when given
// (a power of two up to the page size) and otherwise to the largest power of two
// dividing good_size (at least 8). Failure: allocate throws std::bad_alloc,
// try_allocate returns nullptr; the heap stays usable and leaks nothing.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <new>

#include <boost/intrusive/list.hpp>

#include <allotheque/detail/throwing_allocate.hpp>
#include <allotheque/containers/partition.hpp>
#include <allotheque/detail/bits.hpp>
#include <allotheque/heap_options.hpp>
#include <allotheque/request.hpp>
#include <allotheque/sources/sbrk_source.hpp>
#include <allotheque/sources/source.hpp>

namespace allotheque {

struct heap_stats {
    std::size_t os_bytes = 0;        // held from the source now
    std::size_t peak_os_bytes = 0;   // high-water mark of os_bytes
    std::size_t metadata_bytes = 0;  // class tables mapped outside the source
    std::size_t large_blocks = 0;    // blocks served straight from the source
};

template <partition P, source S = sbrk_source, heap_options_like Options = heap_options<>>
class heap : public detail::throwing_allocate<heap<P, S, Options>> {
    static_assert(P::size_exact,
                  "allotheque::heap: no level of this partition finds chunks of exactly the requested size; a heap "
                  "without splitting needs a size level with match/match_only (and an exact hash), or a size "
                  "level below a non-exact one");
    static_assert(P::address_safe,
                  "allotheque::heap: an address-attribute level uses a pure match predicate; fresh memory from the "
                  "system almost never lands in the hint's class, so the search would fail after every refill (the "
                  "paper's Velox with (match, match)); use match_first, match_last_first or match_next there");

    // Every span from the source ends with one of these, so the heap can give
    // everything back without a separate registry.
    struct trailer : boost::intrusive::list_base_hook<boost::intrusive::link_mode<boost::intrusive::normal_link>> {
        std::byte* base;
        std::size_t bytes;
    };
    using trailer_list = boost::intrusive::list<trailer, boost::intrusive::constant_time_size<false>>;
    static constexpr std::size_t trailer_bytes = detail::round_up(sizeof(trailer), 16);

public:
    using partition_type = P;
    using source_type = S;
    using options = Options;
    // Whether the partition looks at the hint at all (decides the default hint policy).
    static constexpr bool locality_aware = P::reads_address;
    static constexpr std::size_t granularity = 8;
    static constexpr std::size_t min_chunk = detail::round_up(P::min_chunk, granularity);
    static constexpr std::size_t max_alignment = detail::page_size;
    // Larger requests are refused before any arithmetic can overflow.
    static constexpr std::size_t max_size = std::numeric_limits<std::ptrdiff_t>::max() / 2;

    heap() requires std::default_initializable<S> { P::init(root_); }
    explicit heap(S s) : source_(static_cast<S&&>(s)) { P::init(root_); }
    // The root is constructed by P::init (which may map tables), never twice.
    heap(const heap&) = delete;
    heap& operator=(const heap&) = delete;
    ~heap() {
        release_all();
        P::destroy(root_);
    }

    // The chunk size that serves n bytes at alignment a (0: natural), or 0 when
    // the request cannot be served at all (too large, bad alignment).
    static constexpr std::size_t good_size(std::size_t n, std::size_t a = 0) noexcept {
        // The common case first, in the fewest dependent steps: it sits on every
        // allocation and deallocation (halves the composed Kingsley's churn cost).
        // Should the class size pass the threshold, it is served as a large block
        // of that size: allocate and deallocate agree, which is all that matters.
        if (a == 0 && n <= Options::large_threshold)
            return P::round_size(std::max(detail::round_up(n, granularity), min_chunk));
        if (a != 0 && (!detail::is_pow2(a) || a > max_alignment)) return 0;
        if (n > max_size) return 0;
        const std::size_t step = std::max(a, granularity);
        std::size_t s = P::round_size(detail::round_up(std::max(n, min_chunk), step));
        if (a != 0 && detail::natural_alignment(s) < a) s = detail::round_up(s, a);
        if (s > Options::large_threshold) return detail::round_up(n == 0 ? 1 : n, std::max<std::size_t>(a, 16));
        return s;
    }
    static constexpr bool is_large(std::size_t good) noexcept { return good > Options::large_threshold; }

    template <request_like R = request>
    [[nodiscard]] void* try_allocate(const R& r) noexcept {
        const std::size_t s = good_size(r.size, r.alignment);
        if (s == 0) return nullptr;
        if (is_large(s)) return allocate_large(s, r.hint);
        R q = r;
        q.size = s;
        std::byte* p = P::allocate(root_, q);
        if (!p) p = refill(s, r.hint);
        if (p) last_ = p;
        return p;
    }

    // `r` must carry the size (and alignment) given to allocate.
    void deallocate(void* p, const request& r) noexcept {
        if (!p) return;
        const std::size_t s = good_size(r.size, r.alignment);
        if (s == 0) return;   // no allocation can have had this size
        if (is_large(s)) return deallocate_large(static_cast<std::byte*>(p), s);
        P::deallocate(root_, static_cast<std::byte*>(p), s);
    }

    // Gives back `count` blocks allocated with the same size (and alignment) as
    // `r` carries, in one pass over the partition: each run of consecutive
    // blocks that share a class is linked into it after a single class lookup
    // (a container's clear() frees its nodes this way). Null entries are skipped.
    void deallocate_run(void* const* ps, std::size_t count, const request& r) noexcept {
        const std::size_t s = good_size(r.size, r.alignment);
        if (s == 0) return;
        std::byte* batch[64];
        std::size_t k = 0;
        for (std::size_t i = 0; i < count; ++i) {
            if (!ps[i]) continue;
            if (is_large(s)) {
                deallocate_large(static_cast<std::byte*>(ps[i]), s);
                continue;
            }
            batch[k++] = static_cast<std::byte*>(ps[i]);
            if (k == std::size(batch)) {
                deallocate_run_in<P>(root_, batch, k, s);
                k = 0;
            }
        }
        if (k > 0) deallocate_run_in<P>(root_, batch, k, s);
    }

    // Drops every block at once and returns all memory to the source; the heap
    // stays usable. Blocks handed out before are invalid afterwards.
    void deallocate_all() noexcept {
        release_all();
        P::destroy(root_);
        P::init(root_);
    }

    // Where the last small allocation landed: the "near previous" hint.
    const void* last_allocation() const noexcept { return last_; }

    heap_stats stats() const noexcept {
        heap_stats st{os_bytes_, peak_os_bytes_, 0, 0};
        if constexpr (requires { P::metadata_bytes(root_); }) st.metadata_bytes = P::metadata_bytes(root_);
        for ([[maybe_unused]] const trailer& t : large_) ++st.large_blocks;
        return st;
    }
    S& source() noexcept { return source_; }
    typename P::header_type& root() noexcept { return root_; }

    // Told about every range [first, first + bytes) the heap cuts into chunks of
    // `chunk` bytes (a refill span, or the old wilderness given back on growth).
    // With Options::page_spans the ranges are page-aligned and disjoint, so the
    // observer can map every page to its chunk size. Large blocks are not reported.
    using span_observer = void (*)(void* context, std::byte* first, std::size_t bytes, std::size_t chunk) noexcept;
    void set_span_observer(span_observer f, void* context) noexcept {
        observer_ = f;
        observer_context_ = context;
    }

private:
    // Chunks of s bytes start at multiples of their natural alignment: that is
    // the whole alignment guarantee, so the wilderness is aligned before carving.
    std::byte* carve_start(std::size_t s) const noexcept {
        const std::size_t a = page_spans_of<Options> ? detail::page_size : detail::natural_alignment(s);
        return reinterpret_cast<std::byte*>(detail::round_up(detail::address_of(wild_), a));
    }

    // With page_spans: whole pages, and enough of them that the unused end of
    // the span (it holds no chunk of another size) is at most 1/8 of it.
    static constexpr std::size_t span_for(std::size_t s) noexcept {
        std::size_t span = std::max(s, Options::refill_span);
        if constexpr (page_spans_of<Options>) {
            span = detail::round_up(span, detail::page_size);
            for (std::size_t t = span; t <= 8 * span; t += detail::page_size)
                if ((t % s) * 8 <= t) return t;
        }
        return span;
    }

    [[gnu::noinline, gnu::cold]] std::byte* refill(std::size_t s, const void* hint) noexcept {
        const std::size_t span = span_for(s);
        std::byte* p = carve_start(s);
        if ((wild_ == nullptr || wild_end_ - p < static_cast<std::ptrdiff_t>(span))) {
            if (!grow(span, hint, s)) return nullptr;
            p = wild_;
        }
        if (!P::prepare(root_, p, span)) return nullptr;
        wild_ = p + span;
        if (observer_) observer_(observer_context_, p, span, s);
        give_back(p + s, span - s, s);
        return p;
    }

    // Cuts [p, p+n) into chunks of s bytes for the partition, the lowest address
    // on top so that consecutive allocations walk upwards through the span. A
    // remainder that is itself a valid, naturally aligned chunk is kept too.
    void give_back(std::byte* p, std::size_t n, std::size_t s) noexcept {
        std::size_t k = n / s;
        const std::size_t rest = n - k * s;
        std::byte* tail = p + k * s;
        if (!page_spans_of<Options> && rest >= min_chunk && rest % granularity == 0 && P::round_size(rest) == rest &&
            detail::address_of(tail) % detail::natural_alignment(rest) == 0)
            P::deallocate(root_, tail, rest);
        while (k-- > 0) P::deallocate(root_, p + k * s, s);
    }

    bool grow(std::size_t span, const void* hint, std::size_t s) noexcept {
        const std::size_t least = detail::round_up(span + trailer_bytes, detail::page_size);
        std::size_t want = std::clamp(detail::round_up(os_bytes_ / 8, detail::page_size), Options::min_growth,
                                      Options::max_growth);
        want = std::max(want, least);
        std::byte* base = take(want, hint);
        if (!base && want > least) base = take(want = least, hint);
        if (!base) return false;
        // What is left of the old wilderness still serves this size.
        if (wild_ != nullptr) {
            std::byte* rest = carve_start(s);
            if (wild_end_ - rest >= static_cast<std::ptrdiff_t>(s) &&
                P::prepare(root_, rest, static_cast<std::size_t>(wild_end_ - rest))) {
                if (observer_) observer_(observer_context_, rest, static_cast<std::size_t>(wild_end_ - rest), s);
                give_back(rest, static_cast<std::size_t>(wild_end_ - rest), s);
            }
        }
        wild_ = base;
        wild_end_ = base + want - trailer_bytes;
        link(spans_, base, want, wild_end_);
        return true;
    }

    std::byte* take(std::size_t bytes, const void* hint) noexcept {
        auto* p = static_cast<std::byte*>(source_.allocate(bytes, hint));
        if (p) {
            os_bytes_ += bytes;
            peak_os_bytes_ = std::max(peak_os_bytes_, os_bytes_);
        }
        return p;
    }
    void give(trailer& t) noexcept {
        os_bytes_ -= t.bytes;
        source_.deallocate(t.base, t.bytes);
    }
    static void link(trailer_list& l, std::byte* base, std::size_t bytes, std::byte* at) noexcept {
        auto* t = ::new (static_cast<void*>(at)) trailer;
        t->base = base;
        t->bytes = bytes;
        l.push_back(*t);
    }

    [[gnu::noinline, gnu::cold]] void* allocate_large(std::size_t s, const void* hint) noexcept {
        const std::size_t bytes = detail::round_up(s + trailer_bytes, detail::page_size);
        if (bytes == 0) return nullptr;
        std::byte* base = take(bytes, hint);
        if (!base) return nullptr;
        link(large_, base, bytes, base + s);
        return base;
    }
    [[gnu::noinline, gnu::cold]] void deallocate_large(std::byte* p, std::size_t s) noexcept {
        trailer& t = *std::launder(reinterpret_cast<trailer*>(p + s));
        large_.erase(large_.iterator_to(t));
        give(t);
    }

    void release_all() noexcept {
        for (trailer_list* l : {&large_, &spans_})
            while (!l->empty()) {
                trailer& t = l->back();
                l->pop_back();
                give(t);
            }
        wild_ = wild_end_ = nullptr;
        last_ = nullptr;
    }

    union {   // constructed and destroyed by P::init / P::destroy only
        typename P::header_type root_;
    };
    [[no_unique_address]] S source_{};
    trailer_list spans_, large_;
    std::byte* wild_ = nullptr;
    std::byte* wild_end_ = nullptr;
    const void* last_ = nullptr;
    std::size_t os_bytes_ = 0, peak_os_bytes_ = 0;
    span_observer observer_ = nullptr;
    void* observer_context_ = nullptr;
};

} // namespace allotheque
