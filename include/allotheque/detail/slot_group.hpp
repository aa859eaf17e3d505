// `slot_group<GroupBytes>`: the header of one group of the room layer
// (layers/room.hpp): a run of GroupBytes cut into slots of one size, with a
// bitmap of the free slots. The header sits at the group's start, so the
// slots follow it at a 64-byte boundary; a slot of s bytes is then aligned
// to the largest power of two dividing s (at most 64).
//
// What the room layer needs from it: the free slot nearest to a given one
// (so a block lands beside the block it was hinted with, in its cache line
// when the line has a free slot), the first free slot, and the free slot
// nearest a cursor (to spread unrelated blocks out). The bitmap is a
// bitmap_tree, so each of these is a few count-zeros.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

#include <boost/intrusive/list_hook.hpp>

#include <allotheque/detail/bitmap_tree.hpp>

namespace allotheque::detail {

template <std::size_t GroupBytes>
struct slot_group {
    static constexpr std::size_t min_slot = 16;
    static constexpr std::size_t max_slots = GroupBytes / min_slot;
    using bitmap = bitmap_tree<max_slots>;

    std::array<std::uint64_t, bitmap::storage_words> free_words{};   // bit set: slot free
    boost::intrusive::list_member_hook<> below_mark;   // on its size's list of groups with room for foreign blocks
    std::uint16_t size = 0;                    // slot bytes
    std::uint16_t used = 0, cap = 0;
    std::uint16_t cursor = 0;                  // where the next spread placement looks first

    static constexpr std::size_t header_bytes() noexcept;
    std::byte* slots() noexcept { return reinterpret_cast<std::byte*>(this) + header_bytes(); }

    // A fresh group of `cap` slots of `size` bytes, all free.
    explicit slot_group(std::uint16_t s) noexcept
        : size(s), cap(static_cast<std::uint16_t>((GroupBytes - header_bytes()) / s)) {
        for (std::size_t i = 0; i < cap; ++i) free().set(i);
    }

    bool full() const noexcept { return used == cap; }
    bool is_free(std::size_t i) const noexcept { return free().test(i); }

    void* take(std::size_t i) noexcept {
        free().reset(i);
        ++used;
        return slots() + i * size;
    }
    void put(std::size_t i) noexcept {
        free().set(i);
        --used;
    }

    // The lowest free slot (the group must not be full).
    std::size_t first_free() const noexcept { return free().find_next(0); }
    // The free slot closest to slot i, after it on a tie (the group must not be full).
    std::size_t nearest_free(std::size_t i) const noexcept {
        const std::size_t up = free().find_next(i), down = i == 0 ? npos : free().find_prev(i - 1);
        if (up == npos) return down;
        if (down == npos) return up;
        return up - i <= i - down ? up : down;
    }
    // A free slot wholly inside slot i's 64-byte line, else the nearest.
    std::size_t nearest_in_line(std::size_t i) const noexcept {
        const std::size_t line = (i * size + header_bytes()) / 64 * 64;
        const std::size_t first = (line - header_bytes() + size - 1) / size;   // header_bytes() <= line
        for (std::size_t x = first; x < cap && (x + 1) * size + header_bytes() <= line + 64; ++x)
            if (is_free(x)) return x;
        return nearest_free(i);
    }

private:
    bitmap free() const noexcept { return bitmap(const_cast<std::uint64_t*>(free_words.data())); }
};

template <std::size_t GroupBytes>
constexpr std::size_t slot_group<GroupBytes>::header_bytes() noexcept {
    return (sizeof(slot_group) + 63) / 64 * 64;
}
// One line of header for a page of 16-byte slots.
static_assert(sizeof(void*) != 8 || slot_group<4096>::header_bytes() == 64);

} // namespace allotheque::detail
