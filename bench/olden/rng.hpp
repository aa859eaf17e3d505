// Deterministic pseudo-random numbers and hashing for the Olden programs.
// splitmix64 (Steele, Lea, Flood 2014): one 64-bit word of state, every seed
// is valid, and the output stream is identical on every platform, so a
// program's checksum depends only on its inputs, never on the allocator.
#pragma once
#include <cstdint>

namespace bench::olden {

// The splitmix64 output function: a stateless bijective 64-bit mixer.
constexpr std::uint64_t mix64(std::uint64_t x) noexcept {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

// Order-dependent checksum accumulation: fold v into h.
constexpr std::uint64_t combine(std::uint64_t h, std::uint64_t v) noexcept {
    return mix64(h + 0x9e3779b97f4a7c15ULL + mix64(v));
}

class rng {
public:
    constexpr explicit rng(std::uint64_t seed) noexcept : state_(seed) {}

    constexpr std::uint64_t next() noexcept {
        state_ += 0x9e3779b97f4a7c15ULL;
        return mix64(state_);
    }
    // Uniform in [0, n) for n > 0 (multiply-shift, no division).
    constexpr std::uint64_t below(std::uint64_t n) noexcept {
        __extension__ using u128 = unsigned __int128;
        return static_cast<std::uint64_t>((static_cast<u128>(next()) * n) >> 64);
    }
    // Uniform in [0, 1) with 53 random bits.
    constexpr double uniform() noexcept {
        return static_cast<double>(next() >> 11) * 0x1.0p-53;
    }
    // Uniform in [lo, hi).
    constexpr double uniform(double lo, double hi) noexcept { return lo + (hi - lo) * uniform(); }

    constexpr std::uint64_t state() const noexcept { return state_; }

private:
    std::uint64_t state_;
};

} // namespace bench::olden
