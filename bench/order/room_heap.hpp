// A prototype of "leave room in a vicinity" (issue 14, item 3), written over
// public interfaces only so it can be measured before the heap supports it.
//
// Small blocks (16..MaxSmall bytes, 8-byte steps) live in groups of
// GroupBytes, each group cut into slots of one size. A request placed by its
// hint goes to the hint's group when that group has a free slot of the
// request's size, in the free slot nearest to the hint (so a node and the
// node it was hinted with share a cache line whenever one is free). Any other
// request is "foreign": it goes to the size class's open group, and a group
// takes foreign blocks only until fill_percent % of its slots are used; the
// rest stays for hinted requests, i.e. for the future neighbours of the
// blocks already there. Only a size class whose requests mostly carry hints
// (at least a quarter of them, over a decaying window) keeps that room: a class
// nobody hints to (unrelated allocations) fills its groups completely. A
// group whose use falls below its mark (frees) joins the class's partial list
// and is reopened before a fresh group is cut. Foreign blocks are spread
// 100/fill slots apart ("spread"), so each gets free slots beside it. One
// variant measured and rejected: a full group's hinted spill following an
// overflow chain of groups ("chain"), instead of going foreign.
//
// Groups are carved from 2 MiB superblocks mapped straight from the system,
// with the per-group metadata (free bitmap, count) at the superblock's start,
// so a hint's group and metadata are found by masking. Larger or over-aligned
// requests go to the Base heap. Single-threaded, like the heaps.
#pragma once
#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

#include <allotheque/request.hpp>

namespace bench::order {

struct room_knobs {
    unsigned fill = 50;    // how full foreign blocks may make a group of a hinted class (1..100)
    unsigned chain = 0;    // a hinted request whose group is full follows (and grows) that
                           // group's overflow chain for up to this many groups; 0: it is foreign
    bool spread = true;    // foreign blocks 100/fill slots apart, leaving each a free neighbour
};

template <class Base, std::size_t GroupBytes = 4096, std::size_t MaxSmall = 256>
class room_heap {
    static_assert(GroupBytes >= 64 && GroupBytes <= 65536 && std::has_single_bit(GroupBytes));
    static constexpr std::size_t sb_bytes = std::size_t(2) << 20;
    static constexpr std::size_t min_slot = 16;
    static constexpr std::size_t max_slots = GroupBytes / min_slot;
    static constexpr std::size_t words = (max_slots + 63) / 64;
    static constexpr std::size_t classes = MaxSmall / 8 + 1;
    static constexpr std::uint32_t none = ~std::uint32_t(0);

    struct meta {
        std::array<std::uint64_t, words> free;   // 1 = free slot
        std::uint16_t used = 0, cap = 0;
        std::uint8_t cls = 0;
        bool listed = false;                     // on its class's partial list
        std::uint16_t cursor = 0;                // where the next spread placement looks first
        std::uint32_t next = none;               // partial list link (global group index)
        std::uint32_t overflow = none;           // chain: where this group's hinted spill goes
    };
    static constexpr std::size_t groups_per_sb = sb_bytes / GroupBytes;
    static constexpr std::size_t meta_groups = (groups_per_sb * sizeof(meta) + GroupBytes - 1) / GroupBytes;

    struct klass {
        std::uint32_t open = none;      // takes foreign blocks
        std::uint32_t partial = none;   // reopened before a fresh group is cut
        std::uint32_t total = 0, hinted = 0;
        unsigned fill = 100;            // foreign blocks stop at this % of a group
        void count(bool hint, unsigned reserve_fill) noexcept {
            ++total;
            hinted += hint;
            if (total == 256) {
                fill = hinted * 4 >= total ? reserve_fill : 100;
                total /= 2;
                hinted /= 2;
            }
        }
        bool below(const meta& m) const noexcept { return m.used * 100u < m.cap * fill; }
    };

public:
    static constexpr std::size_t max_alignment = Base::max_alignment;
    static constexpr bool locality_aware = true;
    static constexpr std::size_t group_bytes = GroupBytes;

    explicit room_heap(room_knobs k = {}) : k_(k) { k_.fill = std::clamp(k_.fill, 1u, 100u); }
    room_heap(const room_heap&) = delete;
    room_heap& operator=(const room_heap&) = delete;
    ~room_heap() {
        for (std::byte* sb : sbs_) ::munmap(sb, sb_bytes);
    }

    template <class R = allotheque::request>
    void* allocate(const R& r) {
        const std::size_t s = slot_size(r);
        if (s == 0) return remember(base_.allocate(r));
        const std::size_t c = s / 8;
        klass& k = classes_[c];
        std::uint32_t g = group_for(r.hint, c);
        // Only hints into a group of this size count: near_previous hints
        // naming an unrelated block must not make a class keep room.
        k.count(g != none, k_.fill);
        if (g != none) {
            ++counts_.hinted;
            meta& m = meta_of(g);
            if (m.used < m.cap) {
                ++counts_.at_hint;
                return remember(take(g, m, nearest_in_line(m, slot_in(g, r.hint, s), s), s));
            }
            for (unsigned hop = 0; hop < k_.chain; ++hop) {
                if (meta_of(g).overflow == none) {
                    const std::uint32_t o = fresh(c, s);
                    meta_of(g).overflow = o;
                }
                g = meta_of(g).overflow;
                if (meta_of(g).used < meta_of(g).cap) {
                    ++counts_.chained;
                    return remember(take_spread(g, k, s));
                }
            }
        }
        ++counts_.foreign;
        if (k.open == none || !k.below(meta_of(k.open))) k.open = fresh_or_partial(k, c, s);
        return remember(take_spread(k.open, k, s));
    }
    void deallocate(void* p, const allotheque::request& r) noexcept {
        if (!p) return;
        const std::size_t s = slot_size(r);
        if (s == 0) return base_.deallocate(p, r);
        const std::uint32_t g = group_of(p);
        meta& m = meta_of(g);
        const std::size_t i = static_cast<std::size_t>(static_cast<std::byte*>(p) - slots_of(g)) / s;
        m.free[i / 64] |= std::uint64_t(1) << (i % 64);
        --m.used;
        klass& k = classes_[m.cls];
        if (!m.listed && g != k.open && k.below(m)) {
            m.listed = true;
            m.next = k.partial;
            k.partial = g;
        }
    }
    const void* last_allocation() const noexcept { return last_; }
    // Small requests by outcome: hinted into one of our groups of their size
    // (then placed in that group, in its overflow chain, or foreign), and all
    // foreign placements (hinted ones that found no room included).
    struct counters {
        std::size_t hinted = 0, at_hint = 0, chained = 0, foreign = 0;
    };
    counters placement() const noexcept { return counts_; }
    struct stats_type {
        std::size_t os_bytes, peak_os_bytes;
    };
    // Superblocks (never returned before destruction) plus the base heap.
    stats_type stats() const noexcept {
        const auto b = base_.stats();
        return {sbs_.size() * sb_bytes + b.os_bytes, sbs_.size() * sb_bytes + b.peak_os_bytes};
    }

private:
    void* remember(void* p) noexcept {
        last_ = p;
        return p;
    }
    static std::size_t slot_size(const allotheque::request& r) noexcept {
        if (r.alignment > 8 || r.size > MaxSmall) return 0;
        return std::max(min_slot, (r.size + 7) & ~std::size_t(7));
    }
    meta& meta_of(std::uint32_t g) const noexcept {
        return reinterpret_cast<meta*>(sbs_[g / groups_per_sb])[g % groups_per_sb];
    }
    std::byte* slots_of(std::uint32_t g) noexcept { return sbs_[g / groups_per_sb] + (g % groups_per_sb) * GroupBytes; }
    std::size_t slot_in(std::uint32_t g, const void* p, std::size_t s) noexcept {
        const auto i = static_cast<std::size_t>(static_cast<const std::byte*>(p) - slots_of(g)) / s;
        return std::min<std::size_t>(i, meta_of(g).cap - 1u);
    }
    // The group of size class c holding p, or none.
    std::uint32_t group_for(const void* p, std::size_t c) const noexcept {
        if (!p) return none;
        const std::uint32_t g = group_of(p);
        return g != none && meta_of(g).cls == c ? g : none;
    }
    // The group holding p, or none when p is not in a superblock of ours.
    std::uint32_t group_of(const void* p) const noexcept {
        const auto a = reinterpret_cast<std::uintptr_t>(p);
        const auto base = reinterpret_cast<std::byte*>(a & ~(sb_bytes - 1));
        auto it = std::lower_bound(sorted_.begin(), sorted_.end(), std::pair<std::byte*, std::uint32_t>{base, 0});
        if (it == sorted_.end() || it->first != base) return none;
        const std::size_t in = (a & (sb_bytes - 1)) / GroupBytes;
        if (in < meta_groups) return none;
        return static_cast<std::uint32_t>(it->second * groups_per_sb + in);
    }
    static std::size_t first_free(const meta& m) noexcept {
        for (std::size_t w = 0; w < words; ++w)
            if (m.free[w]) return w * 64 + static_cast<std::size_t>(std::countr_zero(m.free[w]));
        return 0;   // not reached: callers check used < cap
    }
    // A free slot sharing slot i's cache line (whole slots only), else the nearest free slot.
    static std::size_t nearest_in_line(const meta& m, std::size_t i, std::size_t s) noexcept {
        if (s <= 32) {
            const std::size_t per = 64 / s, first = i / per * per;
            for (std::size_t x = first; x < first + per && x < m.cap; ++x)
                if ((m.free[x / 64] >> (x % 64)) & 1u) return x;
        }
        return nearest_free(m, i);
    }
    // The free slot closest to slot i (after it on a tie).
    static std::size_t nearest_free(const meta& m, std::size_t i) noexcept {
        std::size_t up = max_slots, down = max_slots;
        for (std::size_t w = i / 64; w < words; ++w) {
            std::uint64_t b = m.free[w];
            if (w == i / 64) b &= ~std::uint64_t(0) << (i % 64);
            if (b) {
                up = w * 64 + static_cast<std::size_t>(std::countr_zero(b));
                break;
            }
        }
        for (std::size_t w = i / 64 + 1; w-- > 0;) {
            std::uint64_t b = m.free[w];
            if (w == i / 64) b &= (i % 64 == 63) ? ~std::uint64_t(0) : ((std::uint64_t(1) << (i % 64 + 1)) - 1);
            if (b) {
                down = w * 64 + 63 - static_cast<std::size_t>(std::countl_zero(b));
                break;
            }
        }
        if (up == max_slots) return down;
        if (down == max_slots) return up;
        return up - i <= i - down ? up : down;
    }
    // The first free slot at or after the group's cursor; the cursor then
    // skips 100/fill slots, so that each block has free neighbours for a while.
    void* take_spread(std::uint32_t g, const klass& k, std::size_t s) noexcept {
        meta& m = meta_of(g);
        if (!k_.spread || k.fill >= 100) return take(g, m, first_free(m), s);
        std::size_t i = m.cursor < m.cap ? nearest_free(m, m.cursor) : first_free(m);
        m.cursor = static_cast<std::uint16_t>(i + std::max(1u, 100u / k.fill));
        return take(g, m, i, s);
    }
    void* take(std::uint32_t g, meta& m, std::size_t i, std::size_t s) noexcept {
        m.free[i / 64] &= ~(std::uint64_t(1) << (i % 64));
        ++m.used;
        return slots_of(g) + i * s;
    }
    std::uint32_t fresh_or_partial(klass& k, std::size_t c, std::size_t s) {
        while (k.partial != none) {
            const std::uint32_t g = k.partial;
            meta& m = meta_of(g);
            k.partial = m.next;
            m.listed = false;
            if (k.below(m)) return g;
        }
        return fresh(c, s);
    }
    std::uint32_t fresh(std::size_t c, std::size_t s) {
        if (next_ == none || next_ % groups_per_sb == 0) add_superblock();
        const std::uint32_t g = next_++;
        meta& m = meta_of(g);
        ::new (&m) meta{};
        m.cap = static_cast<std::uint16_t>(GroupBytes / s);
        m.cls = static_cast<std::uint8_t>(c);
        for (std::size_t i = 0; i < m.cap; ++i) m.free[i / 64] |= std::uint64_t(1) << (i % 64);
        return g;
    }
    void add_superblock() {
        void* p = ::mmap(nullptr, 2 * sb_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) throw std::bad_alloc();
        const auto a = reinterpret_cast<std::uintptr_t>(p);
        const auto aligned = (a + sb_bytes - 1) & ~(sb_bytes - 1);
        if (aligned > a) ::munmap(p, aligned - a);
        ::munmap(reinterpret_cast<void*>(aligned + sb_bytes), a + 2 * sb_bytes - aligned - sb_bytes);
        auto* sb = reinterpret_cast<std::byte*>(aligned);
        const auto index = static_cast<std::uint32_t>(sbs_.size());
        sbs_.push_back(sb);
        sorted_.insert(std::upper_bound(sorted_.begin(), sorted_.end(), std::pair<std::byte*, std::uint32_t>{sb, index}),
                       {sb, index});
        next_ = static_cast<std::uint32_t>(index * groups_per_sb + meta_groups);
    }

    Base base_;
    std::vector<std::byte*> sbs_;
    std::vector<std::pair<std::byte*, std::uint32_t>> sorted_;
    std::array<klass, classes> classes_{};
    std::uint32_t next_ = none;
    const void* last_ = nullptr;
    room_knobs k_;
    counters counts_;
};

} // namespace bench::order
