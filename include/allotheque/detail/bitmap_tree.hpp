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

    // The lowest set position >= i, or npos.
    std::size_t find_next(std::size_t i) const noexcept { return find_from(0, i); }

private:
    std::size_t find_from(std::size_t level, std::size_t i) const noexcept {
        if (i >= L::words[level] * 64) return npos;
        const std::uint64_t* row = w_ + L::offset[level];
        const std::size_t w = i >> 6;
        if (std::uint64_t m = row[w] & (~std::uint64_t{0} << (i & 63))) return (w << 6) + std::countr_zero(m);
        if (level + 1 == L::levels) return npos;
        const std::size_t nw = find_from(level + 1, w + 1);
        return nw == npos ? npos : (nw << 6) + std::countr_zero(row[nw]);
    }

    std::uint64_t* w_;
};

} // namespace allotheque::detail
