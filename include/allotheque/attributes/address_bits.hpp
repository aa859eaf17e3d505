// Address-derived attributes as a bit range [Lo, Hi) of the address.
//
// The paper's K-bit ("the K high bits") assumed 32-bit addresses. On x86-64
// Linux user addresses have 47 significant bits, so "high" must be anchored at
// bit 47, not 64: the paper's vocabulary maps onto ranges as follows.
//   kbit<K>      bits [47-K, 47)  -> classes of 2^(47-K) bytes (paper: 2^(32-K))
//   vicinity<B>  bits [B, 47)     -> classes of 2^B bytes, the form the allocators use
//   skbit<S, K>  bits [S, S+K)    -> classes alias every 2^(S+K) bytes
//   page         bits [12, 47)
//   cache_set<L, Sets> bits [log2 L, log2 L + log2 Sets)
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>

#include <allotheque/attributes/attribute.hpp>
#include <allotheque/detail/bits.hpp>

namespace allotheque {

inline constexpr unsigned address_bits_significant = 47;

template <unsigned Lo, unsigned Hi>
struct address_bits {
    static_assert(Lo < Hi, "address_bits<Lo, Hi>: the range [Lo, Hi) must not be empty");
    static_assert(Hi <= 64, "address_bits<Lo, Hi>: addresses have 64 bits");
    using value_type = std::uint64_t;
    static constexpr bool is_explicit = false;
    static constexpr bool from_address = true;
    static constexpr std::size_t stored_bytes = 0;
    static constexpr unsigned lo = Lo;
    static constexpr unsigned width = Hi - Lo;        // number of distinct classes is 2^width
    static constexpr std::size_t class_bytes = Hi - Lo < 64 && Lo < 64 ? std::size_t{1} << Lo : 0;

    static constexpr value_type of_address(std::uintptr_t a) noexcept {
        return (static_cast<std::uint64_t>(a) >> Lo) & detail::low_mask(width);
    }
    static value_type of_chunk(const std::byte* p, std::size_t) noexcept { return of_address(detail::address_of(p)); }
    // For a compare against a class already known (a size's front, on every
    // free of Velox): a range that ends at the top of user addresses is the
    // shift alone, no mask. A user address has zeros above bit 47, so this is
    // its class; one with bits above (5-level paging) gives 2^width or more,
    // which equals no class, and the compare fails into the caller's slow
    // path, which takes the class from of_chunk.
    static constexpr bool keyed_by_shift = Hi == address_bits_significant;
    static value_type key_of_chunk(const std::byte* p) noexcept {
        if constexpr (keyed_by_shift) return static_cast<std::uint64_t>(detail::address_of(p)) >> Lo;
        else return of_address(detail::address_of(p));
    }
    template <request_like R>
    static value_type of_request(const R& r) noexcept { return of_address(detail::address_of(r.hint)); }
    // The request's class is the hint's: with no hint there is none (a
    // container then goes to its fallbacks; address 0's class is not asked for).
    static constexpr bool target_is_hint = true;
};

template <unsigned K>
using kbit = address_bits<address_bits_significant - K, address_bits_significant>;

template <unsigned Log2Bytes>
using vicinity = address_bits<Log2Bytes, address_bits_significant>;

template <unsigned S, unsigned K>
using skbit = address_bits<S, S + K>;

using page = address_bits<12, address_bits_significant>;

template <std::size_t LineBytes = 64, std::size_t Sets = 1024>
using cache_set = address_bits<std::countr_zero(LineBytes), std::countr_zero(LineBytes) + std::countr_zero(Sets)>;

static_assert(address_attribute<kbit<31>> && address_attribute<page> && address_attribute<cache_set<>>);

} // namespace allotheque
