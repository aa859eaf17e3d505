// Sizes in steps of `Step` up to `Max`, one overflow class above (QuickFit's
// and Defero's small bins). The overflow class mixes sizes, so the hash is not
// exact: the nested partition has to separate sizes again.
#pragma once
#include <bit>
#include <cstddef>

#include <allotheque/containers/class_index.hpp>
#include <allotheque/hashes/hash_function.hpp>
#include <allotheque/detail/bits.hpp>

namespace allotheque {

template <std::size_t Step = 8, std::size_t Max = 128>
struct multiple_of {
    static_assert(detail::is_pow2(Step) && Max % Step == 0, "multiple_of<Step, Max>: Step a power of two dividing Max");
    static constexpr bool exact = false;
    static constexpr std::size_t overflow_class = Max / Step + 1;
    template <class Attr>
    static constexpr std::size_t index_of(typename Attr::value_type n) noexcept {
        return n > Max ? overflow_class : (n + Step - 1) / Step;
    }
    static constexpr std::size_t round(std::size_t n) noexcept { return detail::round_up(n, Step); }
    template <class Attr, class Header, class Init>
    using index = dense_index<overflow_class + 1, Header, Init>;
};

// Exact steps of `Step` up to `Max`, then power-of-two classes: every class
// holds one size, which is what a heap without splitting needs.
template <std::size_t Step = 8, std::size_t Max = 128>
struct multiple_then_pow2 {
    static_assert(detail::is_pow2(Step) && detail::is_pow2(Max) && Max % Step == 0,
                  "multiple_then_pow2<Step, Max>: powers of two, Step dividing Max");
    static constexpr bool exact = true;
    static constexpr std::size_t small_classes = Max / Step + 1;
    template <class Attr>
    static constexpr std::size_t index_of(typename Attr::value_type n) noexcept {
        if (n <= Max) return (n + Step - 1) / Step;
        return small_classes + static_cast<std::size_t>(std::bit_width(n - 1)) - std::bit_width(Max);
    }
    static constexpr std::size_t round(std::size_t n) noexcept {
        return n <= Max ? detail::round_up(n, Step) : std::bit_ceil(n);
    }
    static constexpr size_class classify(std::size_t n) noexcept {
        if (n <= Max) {
            const std::size_t i = (n + Step - 1) / Step;
            return {i * Step, i};
        }
        const auto k = static_cast<std::size_t>(std::bit_width(n - 1));
        return {std::size_t{1} << k, small_classes + k - std::bit_width(Max)};
    }
    template <class Attr, class Header, class Init>
    using index = dense_index<small_classes + 64, Header, Init>;
};

} // namespace allotheque
