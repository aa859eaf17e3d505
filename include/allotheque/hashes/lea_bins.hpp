// Lea's bins: exact classes every `Step` bytes below `SmallMax`, then four
// logarithmically spaced classes per power of two. Classes are ordered by size,
// so "the next non-empty class" is always a larger fit.
#pragma once
#include <bit>
#include <cstddef>

#include <allotheque/containers/class_index.hpp>
#include <allotheque/detail/bits.hpp>

namespace allotheque {

template <std::size_t Step = 16, std::size_t SmallMax = 512>
struct lea_bins {
    static_assert(detail::is_pow2(Step) && detail::is_pow2(SmallMax) && SmallMax > Step, "lea_bins: powers of two");
    static constexpr bool exact = false;
    static constexpr std::size_t small = SmallMax / Step;
    static constexpr unsigned small_log = std::countr_zero(SmallMax);
    template <class Attr>
    static constexpr std::size_t index_of(typename Attr::value_type n) noexcept {
        if (n < SmallMax) return n / Step;
        const unsigned log = static_cast<unsigned>(std::bit_width(n)) - 1;   // n in [2^log, 2^(log+1))
        return small + (log - small_log) * 4 + ((n >> (log - 2)) & 3);
    }
    static constexpr std::size_t round(std::size_t n) noexcept { return detail::round_up(n, Step); }
    template <class Attr, class Header, class Init>
    using index = dense_index<small + 4 * (64 - small_log), Header, Init>;
};

} // namespace allotheque
