// `size_directory<ClassBits>`: for each exact chunk size, which classes of an
// address-keyed table may hold a free chunk of it — the size-major index
// beside the address-major partition (Velox, Medius), so that "the lowest
// class holding size s" is a few count-trailing-zeros instead of a walk over
// classes that do not have it.
//
// It is a superset: a class's bit for size s is set whenever a chunk of size s
// goes into the class, and cleared when a search finds the class without one
// (the search then looks at the next bit). Each stale bit costs one failed
// look, once.
//
// Layout: classes are grouped in leaves of 4096; a leaf, mapped on first use
// (MAP_NORESERVE: only the pages of sizes in use become resident), holds one
// two-level bitmap of its 4096 classes per size. Sizes are indexed in steps of
// 8 up to `max_size` (64 KiB, a heap's default large threshold); the
// directory does not vouch for other sizes, and the caller walks. When a leaf cannot be mapped, the
// directory stops vouching for any size (vouches() is false; a clear keeps the
// leaves, so it stays so): the caller walks every class, as without one.
// next() is only meaningful for a size the directory vouches for.
#pragma once
#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <utility>

#include <allotheque/detail/bitmap_tree.hpp>
#include <allotheque/detail/slot.hpp>

namespace allotheque {

template <unsigned ClassBits>
class size_directory {
    static constexpr unsigned leaf_bits = ClassBits < 12 ? ClassBits : 12;
    static constexpr std::size_t leaf_classes = std::size_t{1} << leaf_bits;
    static constexpr std::size_t leaf_count = std::size_t{1} << (ClassBits - leaf_bits);
    using bitmap = detail::bitmap_tree<leaf_classes>;

public:
    static constexpr std::size_t step = 8;
    static constexpr std::size_t max_size = 64 * 1024;
    static constexpr std::size_t sizes = max_size / step + 1;

private:
    struct leaf {
        std::uint64_t bits[sizes][bitmap::storage_words];
        // The sizes whose row has had a bit set since the last clear: a
        // clear that keeps the pages zeroes those rows alone.
        std::uint64_t rows[(sizes + 63) / 64];
    };
    static constexpr std::size_t leaf_bytes = sizeof(leaf);
    // Leaves in use, by number, kept sorted (a heap touches few of them).
    static constexpr std::size_t max_leaves = 256;
    // Few enough leaves that each has a slot (Medius' 2^16 classes make 16):
    // a class's leaf is then one load, never a search, and a class whose
    // leaf was never mapped certainly holds nothing.
    static constexpr bool direct = leaf_count <= max_leaves;

public:
    static constexpr std::size_t npos = detail::npos;

    size_directory() = default;
    size_directory(const size_directory&) = delete;
    size_directory& operator=(const size_directory&) = delete;
    ~size_directory() {
        for (std::size_t i = 0; i < used_; ++i) ::munmap(leaves_[i].l, leaf_bytes);
    }

    static constexpr bool indexed(std::size_t size) noexcept { return size <= max_size && size % step == 0; }

    // A chunk of `size` went into class `cls`. On every free: the class's
    // leaf at a glance (glance()) and a bit already set cost two compares and
    // one load; the rest is out of line. The size's test comes first, so that
    // it folds away where the caller's sizes are known to be indexed (a table
    // of classes') and the out-of-line half does not repeat it.
    [[gnu::always_inline]] void note(std::size_t size, std::size_t cls) noexcept {
        if (!indexed(size)) return;
        if (const leaf* l = glance(cls)) [[likely]]
            if (has_bit(*l, size, cls)) return;
        note_slow(size, cls);
    }
    // A search found class `cls` without a chunk of `size`. Over leaves
    // found by a search (Velox' vicinities) the bitmap's reset is forced
    // inline: g++ stopped inlining it into the Velox library's search when
    // the malloc's unit grew elsewhere (random sizes: 96.6 -> 97.6
    // instructions a step); over slots (Medius' pages) forcing it cost 0.9.
    void forget(std::size_t size, std::size_t cls) noexcept
        requires direct
    {
        forget_in(size, cls);
    }
    [[gnu::flatten]] void forget(std::size_t size, std::size_t cls) noexcept
        requires(!direct)
    {
        forget_in(size, cls);
    }
    // False only when class `cls` certainly holds no chunk of `size`.
    bool may_hold(std::size_t size, std::size_t cls) const noexcept {
        if (!vouches(size)) return true;
        const leaf* l = find_leaf(cls >> leaf_bits);
        return l && has_bit(*l, size, cls);
    }
    // True only when class `cls` certainly holds no chunk of `size` and that
    // is known without a search for its leaf (the leaf used last, or any leaf
    // where they have a slot each): false is "cannot tell" as well as "may
    // hold".
    [[gnu::always_inline]] bool lacks_at_a_glance(std::size_t size, std::size_t cls) const noexcept {
        const leaf* l = glance(cls);
        if constexpr (direct) return vouches(size) && (!l || !has_bit<true>(*l, size, cls));   // no leaf: nothing noted
        else return l && vouches(size) && !has_bit<true>(*l, size, cls);                        // no leaf: cannot tell
    }
    // Whether next() can be trusted for this size (else the caller walks).
    bool vouches(std::size_t size) const noexcept { return complete_ && indexed(size); }

    // The lowest class >= from that may hold a chunk of `size`, or npos.
    std::size_t next(std::size_t size, std::size_t from) const noexcept {
        if constexpr (direct) {   // the slots in order: no search for the first leaf
            for (std::size_t number = from >> leaf_bits; number < leaf_count; ++number)
                if (const leaf* l = slots_[number])
                    if (const std::size_t c = next_in(*l, number, size, from); c != npos) return c;
            return npos;
        }
        // From the leaf noted last where `from` lies in it (a heap's classes
        // usually lie in one leaf), else from a search among the leaves.
        const std::size_t number = from >> leaf_bits;
        for (std::size_t i = last_ && last_number_ == number ? last_index_ : first_leaf_at_or_after(number); i < used_; ++i)
            if (const std::size_t c = next_in(*leaves_[i].l, leaves_[i].number, size, from); c != npos) return c;
        return npos;
    }

    // The lowest class >= from that may hold a chunk of `size` and that
    // `present(cls)` says still exists (holds any chunk at all), or npos. The
    // bits of classes that no longer exist are forgotten on the way.
    template <class Present>
    std::size_t next_present(std::size_t size, std::size_t from, Present&& present) noexcept {
        for (std::size_t i = next(size, from); i != npos; i = next(size, i + 1)) {
            if (present(i)) return i;
            forget(size, i);
        }
        return npos;
    }

    // Forgets every bit (the table's classes were all emptied); keeps the
    // leaves. With `give_back` (the chunks' memory went back too), their
    // pages go back to the system. Without it (a sweep, which puts most
    // chunks back at once), only the rows in use are zeroed: handing the
    // pages back cost every sweep a page fault per row as the chunks came
    // back (the Velox malloc took 42,000 faults a second on mixed sizes).
    void clear(bool give_back = false) noexcept {
        for (std::size_t i = 0; i < used_; ++i) {
            leaf& l = *leaves_[i].l;
            if (give_back && ::madvise(&l, leaf_bytes, MADV_DONTNEED) == 0) continue;
            for (std::size_t w = 0; w < std::size(l.rows); ++w)
                for (std::uint64_t m = std::exchange(l.rows[w], 0); m != 0; m &= m - 1) {
                    auto& row = l.bits[w * 64 + static_cast<std::size_t>(std::countr_zero(m))];
                    std::fill(std::begin(row), std::end(row), std::uint64_t{0});
                }
        }
        complete_ = used_ < max_leaves;
    }
    std::size_t metadata_bytes() const noexcept { return used_ * leaf_bytes; }

private:
    struct entry {
        std::size_t number;
        leaf* l;
    };

    void forget_in(std::size_t size, std::size_t cls) noexcept {
        if (!indexed(size)) return;
        if (leaf* l = find_leaf(cls >> leaf_bits)) bitmap(l->bits[size / step]).reset(cls & (leaf_classes - 1));
    }
    // next() within leaf `number`: its lowest class >= from with size's bit.
    static std::size_t next_in(const leaf& l, std::size_t number, std::size_t size, std::size_t from) noexcept {
        const std::size_t base = number << leaf_bits;
        const std::size_t j =
            bitmap(const_cast<std::uint64_t*>(l.bits[size / step])).find_next(base >= from ? 0 : from - base);
        return j != npos ? base | j : npos;
    }
    // One load and a shift: it sits on every free (note). Split: the word
    // from cls's bits past the sixth and the bit from its low six, so the
    // class's index in its leaf is never kept whole: a register less where
    // the locality heaps' allocation asks about two classes
    // (lacks_at_a_glance; velox_heap's allocation saved a push and a pop).
    // Not on a free's note, where it cost Medius' random sizes 1.6
    // instructions a step.
    template <bool Split = false>
    [[gnu::always_inline]] static bool has_bit(const leaf& l, std::size_t size, std::size_t cls) noexcept {
        if constexpr (Split && leaf_classes >= 64) {
            return (l.bits[size / step][(cls >> 6) & (leaf_classes / 64 - 1)] >> (cls & 63)) & 1u;
        } else {
            const std::size_t j = cls & (leaf_classes - 1);
            return (l.bits[size / step][j >> 6] >> (j & 63)) & 1u;
        }
    }
    std::size_t first_leaf_at_or_after(std::size_t number) const noexcept {
        return static_cast<std::size_t>(
            std::lower_bound(leaves_, leaves_ + used_, number, [](const entry& e, std::size_t n) { return e.number < n; }) -
            leaves_);
    }
    // Class cls's leaf where that takes no search: its slot, or the leaf
    // used last; else nullptr.
    [[gnu::always_inline]] const leaf* glance(std::size_t cls) const noexcept {
        if constexpr (direct) return slots_[cls >> leaf_bits];
        else return last_ && last_number_ == (cls >> leaf_bits) ? last_ : nullptr;
    }
    leaf* find_leaf(std::size_t number) const noexcept {
        if constexpr (direct) return slots_[number];
        if (last_ && last_number_ == number) return last_;
        const std::size_t i = first_leaf_at_or_after(number);
        return i < used_ && leaves_[i].number == number ? leaves_[i].l : nullptr;
    }
    // A mapped slot, or the leaf used last, costs the bit alone (Medius'
    // frees come here on every stack they make non-empty), with no frame:
    // the search among leaves and the mmap are a tail call.
    [[gnu::noinline]] void note_slow(std::size_t size, std::size_t cls) noexcept {
        const std::size_t number = cls >> leaf_bits;
        leaf* l;
        if constexpr (direct) l = slots_[number];
        else l = last_ && last_number_ == number ? last_ : nullptr;
        if (!l) [[unlikely]]
            return note_mapping(size, cls);
        set_bit(*l, size, cls);
    }
    [[gnu::noinline]] void note_mapping(std::size_t size, std::size_t cls) noexcept {
        leaf* l = map_leaf(cls >> leaf_bits);
        if (!l) {
            complete_ = false;
            return;
        }
        set_bit(*l, size, cls);
    }
    // The row is marked in use when the word its bit goes in was empty (a
    // word with a bit already says the row was marked since the last clear).
    [[gnu::always_inline]] static void set_bit(leaf& l, std::size_t size, std::size_t cls) noexcept {
        const std::size_t j = cls & (leaf_classes - 1);
        std::uint64_t* row = l.bits[size / step];
        if (row[j >> 6] == 0) l.rows[size / step / 64] |= std::uint64_t{1} << (size / step % 64);
        bitmap(row).set(j);
    }
    [[gnu::noinline]] leaf* map_leaf(std::size_t number) noexcept {
        const std::size_t i = first_leaf_at_or_after(number);
        leaf* l = nullptr;
        if (i < used_ && leaves_[i].number == number) {
            l = leaves_[i].l;
        } else {
            if (used_ == max_leaves) return nullptr;
            void* m = ::mmap(nullptr, leaf_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (m == MAP_FAILED) return nullptr;
            l = static_cast<leaf*>(m);
            std::copy_backward(leaves_ + i, leaves_ + used_, leaves_ + used_ + 1);
            leaves_[i] = {number, l};
            ++used_;
            if constexpr (direct) slots_[number] = l;
        }
        last_ = l;
        last_number_ = number;
        last_index_ = i;
        return l;
    }

    entry leaves_[max_leaves] = {};
    std::size_t used_ = 0;
    leaf* last_ = nullptr;
    std::size_t last_number_ = 0;
    std::size_t last_index_ = 0;   // last_'s place in leaves_ (leaves are only inserted, by map_leaf)
    [[no_unique_address]] detail::slot<direct, std::array<leaf*, leaf_count>> slots_{};
    bool complete_ = true;
};

} // namespace allotheque
