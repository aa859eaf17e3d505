// A hierarchy of bitmaps over N positions: each level has one bit per word of
// the level below, set when that word is non-zero. Finding the lowest set bit,
// or the next one after a position, costs one count-trailing-zeros per level
// (ceil(log64 N) levels: 3 for 2^16 classes, 4 for 2^19), which is what lets a
// sparse class table answer "lowest non-empty class" without walking it.
#pragma once
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace allotheque::detail {

inline constexpr std::size_t npos = static_cast<std::size_t>(-1);

template <std::size_t N>
struct bitmap_layout {
    static constexpr std::size_t levels = [] {
        std::size_t l = 1;
        for (std::size_t n = N; n > 64; n = (n + 63) / 64) ++l;
        return l;
    }();
    static constexpr std::array<std::size_t, levels> words = [] {
        std::array<std::size_t, levels> w{};
        std::size_t n = N;
        for (std::size_t l = 0; l < levels; ++l) {
            w[l] = (n + 63) / 64;
            n = w[l];
        }
        return w;
    }();
    static constexpr std::array<std::size_t, levels> offset = [] {
        std::array<std::size_t, levels> o{};
        for (std::size_t l = 1; l < levels; ++l) o[l] = o[l - 1] + words[l - 1];
        return o;
    }();
    static constexpr std::size_t total_words = offset[levels - 1] + words[levels - 1];
};

// Operates on caller-provided, zero-initialised words (inline or mapped).
template <std::size_t N>
class bitmap_tree {
    using L = bitmap_layout<N>;

public:
    static constexpr std::size_t storage_words = L::total_words;

    explicit bitmap_tree(std::uint64_t* words) noexcept : w_(words) {}

    bool test(std::size_t i) const noexcept { return (w_[i >> 6] >> (i & 63)) & 1u; }

    void set(std::size_t i) noexcept {
        for (std::size_t l = 0; l < L::levels; ++l) {
            std::uint64_t& word = w_[L::offset[l] + (i >> 6)];
            const bool was_empty = word == 0;
            word |= std::uint64_t{1} << (i & 63);
            if (!was_empty) return;
            i >>= 6;
        }
    }

    void reset(std::size_t i) noexcept {
        for (std::size_t l = 0; l < L::levels; ++l) {
            std::uint64_t& word = w_[L::offset[l] + (i >> 6)];
            word &= ~(std::uint64_t{1} << (i & 63));
            if (word != 0) return;
            i >>= 6;
        }
    }

    // Whether no position is set: the top level says so in one word (or a few).
    bool empty() const noexcept {
        for (std::size_t k = 0; k < L::words[L::levels - 1]; ++k)
            if (w_[L::offset[L::levels - 1] + k] != 0) return false;
        return true;
    }

    // The lowest set position >= i, or npos. A loop, not a recursion, so that
    // it inlines: it sits on a locality heap's every fallback and release.
    std::size_t find_next(std::size_t i) const noexcept {
        std::size_t l = 0;
        // Up: the first level with a set bit at or after i's position in i's word.
        for (;;) {
            if (i >= L::words[l] * 64) return npos;
            if (const std::uint64_t m = w_[L::offset[l] + (i >> 6)] & (~std::uint64_t{0} << (i & 63))) {
                i = (i & ~std::size_t{63}) + static_cast<std::size_t>(std::countr_zero(m));
                break;
            }
            if (++l == L::levels) return npos;
            i = (i >> 6) + 1;
        }
        // Down: position i at level l says word i of the level below is not
        // zero; its lowest set bit is the next position.
        while (l-- > 0) i = (i << 6) + static_cast<std::size_t>(std::countr_zero(w_[L::offset[l] + i]));
        return i;
    }

    // The highest set position <= i, or npos (i past the end: the highest).
    std::size_t find_prev(std::size_t i) const noexcept {
        if (i >= L::words[0] * 64) i = L::words[0] * 64 - 1;
        std::size_t l = 0;
        for (;;) {
            if (const std::uint64_t m = w_[L::offset[l] + (i >> 6)] & (~std::uint64_t{0} >> (63 - (i & 63)))) {
                i = (i | 63) - static_cast<std::size_t>(std::countl_zero(m));
                break;
            }
            if (++l == L::levels || (i >> 6) == 0) return npos;
            i = (i >> 6) - 1;
        }
        while (l-- > 0) i = (i << 6) + 63 - static_cast<std::size_t>(std::countl_zero(w_[L::offset[l] + i]));
        return i;
    }

private:
    std::uint64_t* w_;
};

} // namespace allotheque::detail
