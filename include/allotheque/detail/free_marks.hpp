// Double-free detection for heaps whose free chunks carry no tag: a freed
// chunk gets a mark (a 64-bit value derived from its address and a per-process
// random key) at a fixed offset, and the allocation that hands it out again
// clears it. Freeing a chunk that already carries the mark is a double free.
// Two marks: `local` (in its heap's partition) and `remote` (on an owner's
// remote-free list, not yet drained), so each path recognises the other's.
//
// A false alarm needs the program to have stored, at that offset of a live
// block, the exact 64-bit value keyed by a random number it cannot read (the
// kernel's AT_RANDOM bytes): a chance of 2^-64 per free for data that is not
// built to hit it. The offset must lie past every link a partition writes into
// a free chunk (the partition's min_chunk), inside the smallest chunk.
#pragma once
#include <sys/auxv.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace allotheque::detail {

inline std::uint64_t read_free_mark_key() noexcept {
    std::uint64_t k = 0x9e3779b97f4a7c15ULL;
    if (const auto* r = reinterpret_cast<const unsigned char*>(::getauxval(AT_RANDOM))) {
        std::uint64_t v;
        std::memcpy(&v, r + 8, sizeof v);   // the first 8 bytes feed the stack protector
        k ^= v;
    }
    return k | 1;
}
// Read once at start-up, then a plain load on every free (no guard). A free
// before that (a constructor that runs earlier) marks with the zero key: such
// a mark matches no later check, so at worst a double free of that one block
// goes unnoticed — never a false alarm. Set by a constructor function, not an
// initialiser: clang guards an inline variable's dynamic initialisation with
// __cxa_guard_acquire, which would make the malloc libraries need libstdc++.
// Every translation unit's copy of the function stores the same value.
inline constinit std::uint64_t free_mark_key_value = 0;
[[gnu::constructor]] static void set_free_mark_key() noexcept { free_mark_key_value = read_free_mark_key(); }
inline std::uint64_t free_mark_key() noexcept { return free_mark_key_value; }

template <std::size_t Offset>
struct free_marks {
    static constexpr std::size_t offset = Offset;
    // The address keyed by xor alone. A multiply after the xor would be
    // invertible: it would hide the key no better from whoever reads a mark,
    // and it would cost every free two instructions.
    static std::uint64_t local(const void* p) noexcept {
        return reinterpret_cast<std::uintptr_t>(p) ^ free_mark_key();
    }
    // The local mark with its lowest bit flipped (a key is odd, so a local
    // mark's is set): the two marks then differ from each other in that bit
    // alone, and `either` is one compare, with no add before it as when the
    // remote mark was the local one's complement (every free: one instruction).
    static std::uint64_t remote(const void* p) noexcept { return local(p) ^ 1; }
    // Whether w is either mark of p: w ^ local(p) is then 0 or 1.
    static bool either(std::uint64_t w, const void* p) noexcept { return (w ^ local(p)) <= 1; }
    static std::uint64_t& word(void* p) noexcept {
        return *reinterpret_cast<std::uint64_t*>(static_cast<std::byte*>(p) + Offset);
    }
};

} // namespace allotheque::detail
