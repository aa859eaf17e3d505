// Power-of-two size classes (Kingsley): class k holds chunks of 2^k bytes.
#pragma once
#include <bit>
#include <cstddef>

#include <allotheque/containers/class_index.hpp>
#include <allotheque/hashes/hash_function.hpp>

namespace allotheque {

struct pow2_segregation {
    static constexpr bool exact = true;
    template <class Attr>
    static constexpr std::size_t index_of(typename Attr::value_type n) noexcept {
        return n <= 1 ? 0 : static_cast<std::size_t>(std::bit_width(n - 1));
    }
    static constexpr std::size_t round(std::size_t n) noexcept { return std::bit_ceil(n); }
    // One bit scan for both (what a hand-written Kingsley does).
    static constexpr size_class classify(std::size_t n) noexcept {
        const auto k = n <= 1 ? std::size_t{0} : static_cast<std::size_t>(std::bit_width(n - 1));
        return {std::size_t{1} << k, k};
    }
    template <class Attr, class Header, class Init>
    using index = dense_index<64, Header, Init>;
};

} // namespace allotheque

namespace allotheque {

// Power-of-two ranges for chunks of any size: class k holds [2^k, 2^(k+1)).
// Requests are rounded up to a power of two, so every chunk of the request's
// class fits. Not exact: for heaps that split.
struct pow2_bins {
    static constexpr bool exact = false;
    template <class Attr>
    static constexpr std::size_t index_of(typename Attr::value_type n) noexcept {
        return n == 0 ? 0 : static_cast<std::size_t>(std::bit_width(n)) - 1;
    }
    static constexpr std::size_t round(std::size_t n) noexcept { return std::bit_ceil(n); }
    template <class Attr, class Header, class Init>
    using index = dense_index<64, Header, Init>;
};

} // namespace allotheque
