// Small bit and alignment helpers shared by every building block.
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace allotheque::detail {

inline constexpr std::size_t page_size = 4096;

constexpr bool is_pow2(std::size_t x) noexcept { return x != 0 && (x & (x - 1)) == 0; }

// Returns 0 when rounding would overflow, so callers can turn it into bad_alloc
// instead of wrapping round to a tiny size.
constexpr std::size_t round_up(std::size_t n, std::size_t a) noexcept {
    return n > std::numeric_limits<std::size_t>::max() - (a - 1) ? 0 : (n + a - 1) & ~(a - 1);
}

// The alignment every chunk of `size` bytes is guaranteed to have: chunks are
// carved at multiples of their size from page-aligned spans.
constexpr std::size_t natural_alignment(std::size_t size) noexcept {
    std::size_t a = size & (~size + 1);
    return a > page_size ? page_size : a;
}

inline std::uintptr_t address_of(const void* p) noexcept { return reinterpret_cast<std::uintptr_t>(p); }

constexpr std::uint64_t low_mask(unsigned bits) noexcept {
    return bits >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1;
}

} // namespace allotheque::detail
