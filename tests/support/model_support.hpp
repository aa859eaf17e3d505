// What the model-based tests share: how many operations to run, the check that
// reports through FAIL only when it trips, and the per-block content pattern.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "catch.hpp"

#include <allotheque/detail/poison.hpp>

// Catch2's REQUIRE/INFO cost microseconds each; the hot path checks with a
// plain branch and reports through FAIL only when something is wrong.
#define MODEL_REQUIRE(cond, msg)                                    \
    do {                                                            \
        if (!(cond)) FAIL("model check failed: " #cond "; " << msg); \
    } while (false)

namespace allotheque_test {

// ALLOTHEQUE_MODEL_OPS overrides the default of 10^6 operations per heap.
inline std::size_t model_ops() {
    if (const char* e = std::getenv("ALLOTHEQUE_MODEL_OPS")) return static_cast<std::size_t>(std::strtoull(e, nullptr, 10));
    return 1'000'000;
}

inline std::uint64_t pattern_word(std::uint64_t id, std::size_t k) {
    return (id * 0x9E3779B97F4A7C15ull) ^ (k * 0x100000001B3ull);
}

// Fills / checks the first `bytes` (a multiple of 8) of an 8-aligned block.
// The tests claim whole chunks (good_size, usable_size), past the size asked
// for, which a memory checker keeps shut (detail/poison.hpp): open them first.
inline void fill_pattern(void* p, std::size_t bytes, std::uint64_t id) {
    allotheque::detail::poison::expose(p, bytes);
    auto* w = static_cast<std::uint64_t*>(p);
    for (std::size_t k = 0; k < bytes / 8; ++k) w[k] = pattern_word(id, k);
}
inline bool pattern_intact(const void* p, std::size_t bytes, std::uint64_t id) {
    const auto* w = static_cast<const std::uint64_t*>(p);
    for (std::size_t k = 0; k < bytes / 8; ++k)
        if (w[k] != pattern_word(id, k)) return false;
    return true;
}

} // namespace allotheque_test
