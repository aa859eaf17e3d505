// `block_heap<Simultaneous, Source, Options>`: the heap for partitions that
// split and coalesce (simultaneous<adjacency<...>, Index>). Every block carries
// its size in a boundary tag, so deallocation needs no size (malloc-style
// free(p) works) and a double free is caught by the tag's in-use bit.
//
// Refill hands a whole span from the source to the partition as one free block
// (Lea's "top"); spans are never merged with each other (an in-use fence closes
// each), and each ends with a trailer that links it for release. Requests above
// the large threshold, or aligned beyond 16 bytes, are mapped on their own.
//
// Guarantees: payloads aligned to 16 bytes (or to the requested alignment, a
// power of two up to the page size); usable_size(p) >= the requested size.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <new>

#include <boost/intrusive/list.hpp>

#include <allotheque/detail/throwing_allocate.hpp>
#include <allotheque/containers/adjacency.hpp>
#include <allotheque/detail/bits.hpp>
#include <allotheque/heap.hpp>
#include <allotheque/heap_options.hpp>
#include <allotheque/request.hpp>
#include <allotheque/sources/source.hpp>

namespace allotheque {

template <class P>
concept block_partition = requires { requires P::manages_blocks; };

template <block_partition P, source S = sbrk_source, heap_options_like Options = heap_options<>>
class block_heap : public detail::throwing_allocate<block_heap<P, S, Options>> {
    using tags = boundary_tags;
    struct link : boost::intrusive::list_base_hook<boost::intrusive::link_mode<boost::intrusive::normal_link>> {
        std::byte* base;
        std::size_t bytes;
    };
    using link_list = boost::intrusive::list<link, boost::intrusive::constant_time_size<false>>;
    static constexpr std::size_t link_bytes = detail::round_up(sizeof(link), 16);

public:
    using partition_type = P;
    using source_type = S;
    static constexpr bool locality_aware = P::reads_address;
    static constexpr std::size_t granularity = tags::align;
    static constexpr std::size_t max_alignment = detail::page_size;
    static constexpr std::size_t max_size = std::numeric_limits<std::ptrdiff_t>::max() / 2;

    block_heap() requires std::default_initializable<S> { P::init(root_); }
    explicit block_heap(S s) : source_(static_cast<S&&>(s)) { P::init(root_); }
    block_heap(const block_heap&) = delete;
    block_heap& operator=(const block_heap&) = delete;
    ~block_heap() {
        release_all();
        P::destroy(root_);
    }

    // Payload bytes a request of n bytes at alignment a really gets (0: refused).
    static constexpr std::size_t good_size(std::size_t n, std::size_t a = 0) noexcept {
        if ((a != 0 && (!detail::is_pow2(a) || a > max_alignment)) || n > max_size) return 0;
        if (is_large(n, a)) return detail::round_up(std::max<std::size_t>(n, 1), 16);
        return P::block_for(n) - tags::in_use_overhead;
    }

    template <request_like R = request>
    [[nodiscard]] void* try_allocate(const R& r) noexcept {
        if ((r.alignment != 0 && (!detail::is_pow2(r.alignment) || r.alignment > max_alignment)) ||
            r.size > max_size)
            return nullptr;
        if (is_large(r.size, r.alignment)) return allocate_large(r.size, r.alignment, r.hint);
        R q = r;
        q.size = P::block_for(r.size);
        std::byte* p = P::allocate(root_, q);
        if (!p && P::coalesce_waiting(root_)) p = P::allocate(root_, q);
        if (!p && grow(q.size, r.hint)) p = P::allocate(root_, q);
        if (p) last_ = p;
        return p;
    }

    // Sized deallocation (the size is not needed: the tag has it).
    void deallocate(void* p, const request&) noexcept { deallocate(p); }
    void deallocate(void* p) noexcept {
        if (!p) return;
        std::byte* b = tags::block_of(p);
        const std::size_t h = tags::head(b);
        // Catches a second free of a coalesced block; a block waiting for
        // deferred coalescing still looks in use (the checked layer sees those).
        if (!(h & tags::in_use)) fail("double free (or a pointer this heap never gave out)", p);
        if (h & tags::large) return deallocate_large(b);
        P::deallocate(root_, static_cast<std::byte*>(p));
    }

    // Bytes the caller may use at p (at least what it asked for).
    static std::size_t usable_size(const void* p) noexcept {
        const std::byte* b = static_cast<const std::byte*>(p) - tags::payload_offset;
        const std::size_t h = tags::head(b);
        return (h & tags::large) ? large_usable(b) : (h & ~tags::flags) - tags::in_use_overhead;
    }

    void deallocate_all() noexcept {
        release_all();
        P::destroy(root_);
        P::init(root_);
    }
    const void* last_allocation() const noexcept { return last_; }
    heap_stats stats() const noexcept {
        heap_stats st{os_bytes_, peak_os_bytes_, 0, 0};
        for ([[maybe_unused]] const link& l : large_) ++st.large_blocks;
        return st;
    }
    S& source() noexcept { return source_; }

private:
    static constexpr bool is_large(std::size_t n, std::size_t a) noexcept {
        return a > tags::align || n > Options::large_threshold;
    }

    [[gnu::noinline, gnu::cold]] bool grow(std::size_t need, const void* hint) noexcept {
        const std::size_t least = detail::round_up(need + tags::align + link_bytes + tags::align, detail::page_size);
        std::size_t want = std::clamp(detail::round_up(os_bytes_ / 8, detail::page_size), Options::min_growth,
                                      Options::max_growth);
        want = std::max(want, least);
        std::byte* base = take(want, hint);
        if (!base && want > least) base = take(want = least, hint);
        if (!base) return false;
        std::byte* end = base + want - link_bytes;
        if (!P::adopt(root_, base, static_cast<std::size_t>(end - base))) {
            give(base, want);
            return false;
        }
        remember(spans_, base, want, end);
        return true;
    }

    // A large block: [link][.. padding ..][prev_size][head = usable | IN_USE | LARGE][payload]
    [[gnu::noinline, gnu::cold]] void* allocate_large(std::size_t n, std::size_t a, const void* hint) noexcept {
        const std::size_t lead = detail::round_up(link_bytes + tags::payload_offset, std::max<std::size_t>(a, 16));
        const std::size_t usable = detail::round_up(std::max<std::size_t>(n, 1), 16);
        const std::size_t bytes = detail::round_up(lead + usable, detail::page_size);
        if (bytes == 0 || bytes < usable) return nullptr;
        std::byte* base = take(bytes, hint);
        if (!base) return nullptr;
        std::byte* payload = base + lead;
        tags::head(tags::block_of(payload)) = (payload - base) | tags::in_use | tags::large;
        remember(large_, base, bytes, base);
        return payload;
    }
    static std::size_t large_usable(const std::byte* b) noexcept {
        const std::byte* base = b + tags::payload_offset - (tags::head(b) & ~tags::flags);
        return reinterpret_cast<const link*>(base)->bytes - (tags::head(b) & ~tags::flags);
    }
    [[gnu::noinline, gnu::cold]] void deallocate_large(std::byte* b) noexcept {
        std::byte* base = b + tags::payload_offset - (tags::head(b) & ~tags::flags);
        link& l = *std::launder(reinterpret_cast<link*>(base));
        large_.erase(large_.iterator_to(l));
        give(l.base, l.bytes);
    }

    std::byte* take(std::size_t bytes, const void* hint) noexcept {
        auto* p = static_cast<std::byte*>(source_.allocate(bytes, hint));
        if (p) peak_os_bytes_ = std::max(peak_os_bytes_, os_bytes_ += bytes);
        return p;
    }
    void give(std::byte* base, std::size_t bytes) noexcept {
        os_bytes_ -= bytes;
        source_.deallocate(base, bytes);
    }
    static void remember(link_list& l, std::byte* base, std::size_t bytes, std::byte* at) noexcept {
        auto* k = ::new (static_cast<void*>(at)) link;
        k->base = base;
        k->bytes = bytes;
        l.push_back(*k);
    }
    void release_all() noexcept {
        for (link_list* l : {&large_, &spans_})
            while (!l->empty()) {
                link& k = l->back();
                l->pop_back();
                give(k.base, k.bytes);
            }
        last_ = nullptr;
    }
    [[noreturn]] static void fail(const char* what, const void* p) noexcept {
        std::fprintf(stderr, "allotheque::block_heap: %s: %p\n", what, p);
        std::abort();
    }

    union {
        typename P::header_type root_;
    };
    [[no_unique_address]] S source_{};
    link_list spans_, large_;
    const void* last_ = nullptr;
    std::size_t os_bytes_ = 0, peak_os_bytes_ = 0;
};

} // namespace allotheque
