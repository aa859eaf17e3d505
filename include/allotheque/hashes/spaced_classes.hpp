// Exact size classes spaced as modern mallocs space them: multiples of `Step`
// up to `Linear`, then `PerDoubling` evenly spaced sizes in every power-of-two
// range (Linear = 128, four per doubling: 160, 192, 224, 256, 320, ...), so no
// block wastes more than a quarter of its size to rounding above `Linear`.
// Every class holds one size: a heap without splitting can use it.
// `MaxSize` (0: none) bounds the classes, so that a table of them is as small
// as the sizes a heap puts in it (a heap whose large threshold is above it is
// refused at compile time: hash_table::max_chunk).
#pragma once
#include <bit>
#include <cstddef>

#include <allotheque/containers/class_index.hpp>
#include <allotheque/hashes/hash_function.hpp>
#include <allotheque/detail/bits.hpp>

namespace allotheque {

template <std::size_t Step = 16, std::size_t Linear = 128, std::size_t PerDoubling = 4, std::size_t MaxSize = 0>
struct spaced_classes {
    static_assert(detail::is_pow2(Step) && detail::is_pow2(Linear) && detail::is_pow2(PerDoubling),
                  "spaced_classes<Step, Linear, PerDoubling>: powers of two");
    static_assert(Linear >= Step * PerDoubling, "spaced_classes: Linear >= Step * PerDoubling keeps steps >= Step");
    static constexpr bool exact = true;
    static constexpr std::size_t linear_classes = Linear / Step + 1;
    static constexpr unsigned linear_log = std::countr_zero(Linear);
    static constexpr unsigned per_log = std::countr_zero(PerDoubling);

    // computed(n).index, written out: through computed, Velox's malloc cost
    // 2.8 instructions a step more on random sizes.
    template <class Attr>
    static constexpr std::size_t index_of(typename Attr::value_type n) noexcept {
        if (n <= Linear) return (n + Step - 1) / Step;
        const unsigned g = static_cast<unsigned>(std::bit_width(n - 1)) - 1;   // n in (2^g, 2^(g+1)]
        const std::size_t step_log = g - per_log;
        const std::size_t sub = (n - (std::size_t{1} << g) + (std::size_t{1} << step_log) - 1) >> step_log;
        return linear_classes + (g - linear_log) * PerDoubling + (sub - 1);
    }
    // Forced inline: it sits on the malloc libraries' fast paths (through
    // hash_table::round_size), where g++ left it out of line once their
    // translation units grew (Velox's aligned_alloc 148 -> 162 instructions).
    [[gnu::always_inline]] static constexpr std::size_t round(std::size_t n) noexcept {
        if (n <= Linear) return detail::round_up(n, Step);
        const unsigned g = static_cast<unsigned>(std::bit_width(n - 1)) - 1;
        return detail::round_up(n, std::size_t{1} << (g - per_log));
    }
    // Up to `table_max`, one load from a table built at compile time.
    static constexpr std::size_t table_max = 1024;
    static constexpr std::size_t table_entries = table_max / Step + 1;
    static constexpr size_class computed(std::size_t n) noexcept {
        if (n <= Linear) {
            const std::size_t i = (n + Step - 1) / Step;
            return {i * Step, i};
        }
        const unsigned g = static_cast<unsigned>(std::bit_width(n - 1)) - 1;
        const unsigned step_log = g - per_log;
        const std::size_t sub = (n - (std::size_t{1} << g) + (std::size_t{1} << step_log) - 1) >> step_log;
        return {(std::size_t{1} << g) + (sub << step_log), linear_classes + (g - linear_log) * PerDoubling + (sub - 1)};
    }
    struct table_type {
        size_class entries[table_entries];
    };
    static constexpr table_type table = [] {
        table_type t{};
        for (std::size_t k = 0; k < table_entries; ++k) t.entries[k] = computed(k * Step);
        return t;
    }();
    [[gnu::always_inline]] static constexpr size_class classify(std::size_t n) noexcept {
        if (n <= table_max) return table.entries[(n + Step - 1) / Step];
        return computed(n);
    }
    static constexpr std::size_t computed_size_of(std::size_t k) noexcept {
        if (k < linear_classes) return k * Step;
        const std::size_t j = k - linear_classes;
        const std::size_t g = linear_log + j / PerDoubling;
        return (std::size_t{1} << g) + ((j % PerDoubling + 1) << (g - per_log));
    }
    static constexpr std::size_t max_size = MaxSize != 0 ? MaxSize : ~std::size_t{0};
    // Every class up to MaxSize, or every class a 64-bit size has.
    static constexpr std::size_t class_count =
        MaxSize != 0 ? computed(MaxSize).index + 1 : linear_classes + (64 - linear_log) * PerDoubling;
    // The table of sizes exists where the classes are bounded.
    static constexpr std::size_t bounded_classes = MaxSize != 0 ? class_count : 1;
    struct sizes_type {
        std::size_t entries[bounded_classes];
    };
    static constexpr sizes_type sizes = [] {
        sizes_type t{};
        for (std::size_t k = 0; k < bounded_classes; ++k) t.entries[k] = computed_size_of(k);
        return t;
    }();
    // The size of class k, classify's inverse (one load where the classes are
    // bounded): a table of sizes (the Velox and Medius frees) reads a missed
    // chunk's size from its class instead of from its span, a load every
    // free made before it knew it would miss.
    [[gnu::always_inline]] static constexpr std::size_t size_of_class(std::size_t k) noexcept {
        if constexpr (MaxSize != 0) return sizes.entries[k];
        else return computed_size_of(k);
    }
    static_assert(MaxSize == 0 || (MaxSize > Linear && round(MaxSize) == MaxSize),
                  "spaced_classes: MaxSize is a class size above Linear");
    template <class Attr, class Header, class Init>
    using index = dense_index<class_count, Header, Init>;
};

} // namespace allotheque
