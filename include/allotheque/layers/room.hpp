// `room<H, Config, S>`: placement that leaves room for the blocks that will be
// hinted later (issue 14: when allocation order is not access order).
//
// A node inserted in random key order gets its hint (its parent) long after
// the parent was placed; by then a heap that packs blocks in allocation order
// has filled the parent's page with unrelated blocks. This layer keeps part
// of each page free for the future neighbours of the blocks already there:
//
//   - Small requests (up to Config.max_small bytes, alignment the slot's)
//     live in groups of Config.group_bytes cut into slots of one size
//     (detail/slot_group.hpp). A request whose hint lies in a group of its
//     size takes the free slot nearest the hint (in the hint's 64-byte line
//     when the line has one), as long as the group has a free slot.
//   - Any other small request is foreign: it goes to its size's open group,
//     which takes foreign blocks only up to Config.fill_percent of its
//     slots, spread out so each has free neighbours; the rest stays for
//     hinted requests. A group that frees fall below that mark is reused
//     before a fresh one is cut.
//   - Only a size whose requests carry hints into its groups (at least
//     Config.hinted_percent of them over a decaying window of 256; 0: every
//     size) keeps room:
//     a size nobody hints to fills its groups completely, so unrelated
//     allocations cost no memory.
//   - Larger or more aligned requests go to H, as do their frees.
//
// Groups are spans of the back end (state `group` in the page map), so a
// pointer finds its group and a hint is recognised by one page-map lookup;
// a group that empties goes back to the back end (it keeps one per size, the
// open one). deallocate(p) and usable_size(p) work without a size for both
// kinds of block when H has them.
//
// Bad input: a free of a slot that is already free or of a pointer inside a
// slot aborts with a message (the page map says it is a group's); any other
// pointer is H's to judge. When the back end refuses a group, try_allocate
// returns nullptr and allocate throws std::bad_alloc.
//
// Single-threaded like the heaps (wrap it in locked<> to share it). It cannot
// sit under per_thread: a group's blocks do not name an owning heap.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>

#include <boost/intrusive/list.hpp>

#include <allotheque/backend/page_map.hpp>
#include <allotheque/backend/span_registry.hpp>
#include <allotheque/detail/fail.hpp>
#include <allotheque/detail/slot_group.hpp>
#include <allotheque/heap_options.hpp>
#include <allotheque/layers/layer.hpp>
#include <allotheque/request.hpp>
#include <allotheque/sources/arena_source.hpp>

namespace allotheque::layers {

struct room_config {
    std::size_t group_bytes = 4096;   // a whole number of pages, at most 64 KiB
    std::size_t max_small = 256;      // larger requests go to the parent heap
    unsigned fill_percent = 25;       // foreign blocks fill a group of a hinted size up to this share
    unsigned hinted_percent = 25;     // a size keeps room when this share of its requests are hinted into it
    bool spread = true;               // foreign blocks 100 / fill_percent slots apart
};

template <heap H, room_config Config = room_config{}, source S = arena_source>
class room : public layer<room<H, Config, S>, H> {
    static_assert(Config.group_bytes % detail::page_size == 0 && Config.group_bytes <= 65536,
                  "layers::room: group_bytes must be a whole number of pages, at most 64 KiB");
    static_assert(Config.max_small >= 16 && Config.max_small % 8 == 0 && Config.max_small <= Config.group_bytes / 8,
                  "layers::room: max_small a multiple of 8 between 16 and an eighth of a group");
    static_assert(Config.fill_percent >= 1 && Config.fill_percent <= 100 && Config.hinted_percent <= 100,
                  "layers::room: fill_percent in 1..100, hinted_percent in 0..100");

    using base = layer<room<H, Config, S>, H>;
    using group = detail::slot_group<Config.group_bytes>;
    using span = backend::span;
    using group_list = boost::intrusive::list<
        group, boost::intrusive::member_hook<group, boost::intrusive::list_member_hook<>, &group::below_mark>,
        boost::intrusive::constant_time_size<false>>;

    struct size_state {
        group* open = nullptr;      // takes foreign blocks
        group_list below;           // groups below the mark, reused before a fresh one
        std::uint32_t total = 0, hinted = 0;
        unsigned fill = 100;        // foreign blocks stop at this share of a group
        void count(bool hint) noexcept {
            ++total;
            hinted += hint;
            if (total == 256) {
                fill = hinted * 100 >= total * Config.hinted_percent ? Config.fill_percent : 100;
                total /= 2;
                hinted /= 2;
            }
        }
        bool below_mark(const group& g) const noexcept { return g.used * 100u < g.cap * fill; }
    };

public:
    static constexpr std::size_t granularity = 8;
    static constexpr std::size_t slot_sizes = Config.max_small / 8 - 1;   // 16, 24, ..., max_small
    static constexpr bool locality_aware = true;

    using base::base;
    ~room() { release_groups(); }

    // Outcomes of small requests, for benchmarks: hinted into a group of their
    // size, of which placed there; placed as foreign blocks (including hinted
    // ones whose group was full).
    struct counters {
        std::size_t hinted = 0, at_hint = 0, foreign = 0;
    };
    counters placement() const noexcept { return counts_; }

    std::size_t good_size(std::size_t n, std::size_t a = 0) const noexcept {
        const std::size_t s = slot_size(n, a);
        return s ? s : this->parent_.good_size(n, a);
    }

    template <request_like R = request>
    [[nodiscard]] void* try_allocate(const R& r) noexcept {
        const std::size_t s = slot_size(r.size, r.alignment);
        void* p = s ? take_slot(r.hint, s) : this->parent_.try_allocate(r);
        if (!p) return nullptr;
        if (s && r.zero) std::memset(p, 0, s);
        last_ = p;
        return p;
    }

    void deallocate(void* p, const request& r) noexcept {
        if (!p) return;
        if (span* sp = group_span(p)) return free_slot(sp, p);
        this->parent_.deallocate(p, r);
    }
    void deallocate(void* p) noexcept
        requires has_unsized_deallocate<H>
    {
        if (!p) return;
        if (span* sp = group_span(p)) return free_slot(sp, p);
        this->parent_.deallocate(p);
    }
    std::size_t usable_size(const void* p) const noexcept
        requires has_usable_size<H>
    {
        if (const span* sp = group_span(p)) return sp->chunk;
        return this->parent_.usable_size(p);
    }
    bool owns(const void* p) const noexcept {
        if (group_span(p)) return true;
        if constexpr (has_owns<H>) return this->parent_.owns(p);
        else return false;
    }
    // A group's blocks have no owner tag per_thread could route by.
    static const void* owner_of(const void*) noexcept = delete;

    void deallocate_all() noexcept
        requires has_deallocate_all<H>
    {
        release_groups();
        this->parent_.deallocate_all();
    }
    std::size_t trim() noexcept {
        std::size_t n = groups_.pool().trim();
        if constexpr (has_trim<H>) n += this->parent_.trim();
        return n;
    }
    // The parent's statistics with the groups' memory added (os_bytes and
    // peak_os_bytes; the peak is the sum of the two peaks, an upper bound).
    auto stats() const noexcept
        requires has_stats<H>
    {
        auto st = this->parent_.stats();
        if constexpr (requires { st.os_bytes; st.peak_os_bytes; }) {
            const backend::pool_stats g = groups_.pool().stats();
            st.os_bytes += g.os_bytes + g.metadata_bytes;
            st.peak_os_bytes += g.peak_os_bytes + g.metadata_bytes;
        }
        return st;
    }
    const void* last_allocation() const noexcept { return last_; }
    // Groups held now (each Config.group_bytes).
    std::size_t groups() const noexcept { return groups_.count(backend::span_state::group); }

private:
    // The slot size serving (n, a), or 0 when the parent serves it.
    static constexpr std::size_t slot_size(std::size_t n, std::size_t a) noexcept {
        if (n > Config.max_small) return 0;
        const std::size_t s = std::max<std::size_t>(group::min_slot, (n + 7) & ~std::size_t{7});
        const std::size_t natural = std::min<std::size_t>(s & (~s + 1), 64);
        return a <= natural && (a & (a - 1)) == 0 ? s : 0;   // other alignments: the parent's answer
    }

    // The group span holding p, when p lies in a group of this layer.
    span* group_span(const void* p) const noexcept {
        span* sp = backend::page_map::instance().find(p);
        return sp && sp->state == backend::span_state::group && sp->owner == this ? sp : nullptr;
    }
    static group& group_of(span* sp) noexcept { return *reinterpret_cast<group*>(sp->base); }
    // The slot holding p, which may point anywhere in it (a hint); p at or
    // past the group's slots.
    static std::size_t slot_holding(group& g, const void* p) noexcept {
        return static_cast<std::uint32_t>(static_cast<const std::byte*>(p) - g.slots()) / g.size;
    }
    // The slot starting at p, or a number past every slot (span::chunk_number).
    static std::size_t slot_at(const span* sp, group& g, const void* p) noexcept {
        return sp->chunk_number(static_cast<std::uint64_t>(static_cast<const std::byte*>(p) - g.slots()));
    }

    void* take_slot(const void* hint, std::size_t s) noexcept {
        size_state& k = sizes_[s / 8];
        span* hs = hint ? group_span(hint) : nullptr;
        const bool ours = hs && hs->chunk == s;
        k.count(ours);
        if (ours) {
            ++counts_.hinted;
            group& g = group_of(hs);
            if (!g.full()) {
                ++counts_.at_hint;
                const auto* h = static_cast<const std::byte*>(hint);
                const std::size_t i = h < g.slots() ? 0 : std::min<std::size_t>(slot_holding(g, hint), g.cap - 1u);
                return g.take(g.nearest_in_line(i));
            }
        }
        ++counts_.foreign;
        if (!k.open || !k.below_mark(*k.open)) {
            group* g = reuse_or_open(k, s);
            if (!g) return nullptr;
            k.open = g;
        }
        group& g = *k.open;
        if (!Config.spread || k.fill >= 100) return g.take(g.first_free());
        const std::size_t i = g.cursor < g.cap ? g.nearest_free(g.cursor) : g.first_free();
        g.cursor = static_cast<std::uint16_t>(std::min<std::size_t>(i + std::max(1u, 100u / k.fill), 0xffff));
        return g.take(i);
    }

    group* reuse_or_open(size_state& k, std::size_t s) noexcept {
        while (!k.below.empty()) {
            group& g = k.below.front();
            k.below.pop_front();
            if (k.below_mark(g)) return &g;
        }
        span* sp = groups_.open(Config.group_bytes, nullptr, backend::span_state::group, this);
        if (!sp) return nullptr;
        sp->set_chunk(static_cast<std::uint32_t>(s));
        return ::new (sp->base) group(static_cast<std::uint16_t>(s));
    }

    void free_slot(span* sp, void* p) noexcept {
        group& g = group_of(sp);
        const auto* b = static_cast<const std::byte*>(p);
        const std::size_t i = b < g.slots() ? g.cap : slot_at(sp, g, p);
        if (i >= g.cap || g.slots() + i * g.size != b) detail::fail("allotheque::layers::room", "not a block", "deallocate", p);
        if (g.is_free(i)) detail::fail("allotheque::layers::room", "double free", "deallocate", p);
        g.put(i);
        size_state& k = sizes_[g.size / 8];
        if (&g == k.open) return;
        if (g.used == 0) {   // empty: back to the back end
            if (g.below_mark.is_linked()) k.below.erase(k.below.iterator_to(g));
            return close(sp);
        }
        if (!g.below_mark.is_linked() && k.below_mark(g)) k.below.push_front(g);
    }

    void close(span* sp) noexcept {
        group_of(sp).~group();
        groups_.close(sp);
    }
    void release_groups() noexcept {
        for (size_state& k : sizes_) {
            k.below.clear();
            k.open = nullptr;
        }
        groups_.for_each([](span& sp) { group_of(&sp).~group(); });
        groups_.close_all();
    }

    backend::span_registry<S, configured<heap_config{}>> groups_;
    std::array<size_state, slot_sizes + 2> sizes_{};   // indexed by slot size / 8
    const void* last_ = nullptr;
    counters counts_;
};

} // namespace allotheque::layers
