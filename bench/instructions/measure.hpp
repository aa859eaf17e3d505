// The instruction-count benchmark's harness (bench/instructions, see
// bench/README.md): the counted region, the inputs every allocator gets, and
// the patterns shared by both programs (malloc by LD_PRELOAD, header-only
// heaps used directly).
//
// run.py starts the programs under `valgrind --tool=callgrind
// --collect-atstart=no`, so nothing is counted until a counted_region turns
// collection on. Callgrind keeps that switch per thread; a region counts only
// the thread that opened it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define ALLOTHEQUE_INSTR_HAVE_CALLGRIND 1
#else
#define ALLOTHEQUE_INSTR_HAVE_CALLGRIND 0
#endif

namespace bench::instructions {

inline bool under_valgrind() noexcept {
#if ALLOTHEQUE_INSTR_HAVE_CALLGRIND
    return RUNNING_ON_VALGRIND != 0;
#else
    return false;
#endif
}

// Forced inline: the toggle's own few instructions are then all that the
// region adds to the count, not a call and a return on either side.
[[gnu::always_inline]] inline void toggle_collect() noexcept {
#if ALLOTHEQUE_INSTR_HAVE_CALLGRIND
    CALLGRIND_TOGGLE_COLLECT;
#endif
}

class counted_region {
public:
    [[gnu::always_inline]] counted_region() noexcept { toggle_collect(); }
    [[gnu::always_inline]] ~counted_region() { toggle_collect(); }
    counted_region(const counted_region&) = delete;
    counted_region& operator=(const counted_region&) = delete;
};

// The block's address leaves the compiler's sight and its memory counts as
// read: no allocation can be elided or merged with the next, whatever the
// optimiser knows about the allocator.
[[gnu::always_inline]] inline void escape(void* p) noexcept { asm volatile("" : : "r"(p) : "memory"); }

// Between two calls a program runs other code, which may read and write
// memory the allocator's state lives in: after every deallocate, the compiler
// must reload that state. Without it, an inlined heap's push followed by the
// next pop is folded in the closed world of a benchmark loop (the block just
// pushed is known to be the head): 5 instructions a pair, for any free list.
[[gnu::always_inline]] inline void clobber() noexcept { asm volatile("" : : : "memory"); }

// One store into the block, as a program would use it: an allocator that
// hands out untouched memory pays for it here, as it would in a program.
[[gnu::always_inline]] inline void touch(void* p) noexcept {
    *static_cast<unsigned char*>(p) = 1;
    escape(p);
}

// splitmix64: a fixed seed gives every allocator the same sizes and slots.
class rng {
    std::uint64_t s_;

public:
    explicit rng(std::uint64_t seed) noexcept : s_(seed) {}
    std::uint64_t next() noexcept {
        std::uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    std::uint32_t between(std::uint32_t lo, std::uint32_t hi) noexcept {   // [lo, hi]
        return lo + static_cast<std::uint32_t>(next() % (hi - lo + 1));
    }
};

inline constexpr std::size_t pair_size = 32;
inline constexpr std::size_t batch_blocks = 100;
inline constexpr std::size_t random_slots = 1000;

// Sizes of one batch: 32..64 B, the same for every batch and allocator.
inline std::vector<std::uint32_t> batch_sizes() {
    rng r(31);
    std::vector<std::uint32_t> v(batch_blocks);
    for (auto& x : v) x = r.between(32, 64);
    return v;
}

// Each step of `random` frees the block in a random slot and puts a block of a
// random size (8..1024 B) there. Drawn before anything is counted, so the
// generator's instructions are nobody's.
struct random_inputs {
    std::vector<std::uint32_t> sizes;
    std::vector<std::uint32_t> slots;
    std::vector<std::uint32_t> fill;   // the sizes the slots start with
    explicit random_inputs(std::size_t steps) : sizes(steps), slots(steps), fill(random_slots) {
        rng r(1031);
        for (auto& x : fill) x = r.between(8, 1024);
        for (std::size_t i = 0; i < steps; ++i) {
            sizes[i] = r.between(8, 1024);
            slots[i] = r.between(0, random_slots - 1);
        }
    }
};

// The patterns over a policy with allocate(n, hint) and deallocate(p, n)
// (bench/common/policies.hpp's shape). Each loop is out of line so that its
// code is the same whether it warms up or is counted; the caller wraps the
// counted call in a counted_region.
template <class P>
[[gnu::noinline]] void pair_loop(P& p, std::size_t steps) {
    for (std::size_t i = 0; i < steps; ++i) {
        void* q = p.allocate(pair_size, nullptr);
        touch(q);
        p.deallocate(q, pair_size);
        clobber();
    }
}

// Frees in allocation order: the batch's first block, the oldest, goes first.
template <class P>
[[gnu::noinline]] void batch_loop(P& p, std::size_t batches, const std::uint32_t* sizes, void** blocks) {
    for (std::size_t b = 0; b < batches; ++b) {
        for (std::size_t i = 0; i < batch_blocks; ++i) {
            blocks[i] = p.allocate(sizes[i], nullptr);
            touch(blocks[i]);
        }
        for (std::size_t i = 0; i < batch_blocks; ++i) {
            p.deallocate(blocks[i], sizes[i]);
            clobber();
        }
    }
}

template <class P>
[[gnu::noinline]] void random_loop(P& p, const std::uint32_t* sizes, const std::uint32_t* slots, std::size_t steps,
                                  void** live, std::uint32_t* live_sizes) {
    for (std::size_t i = 0; i < steps; ++i) {
        const std::uint32_t s = slots[i];
        p.deallocate(live[s], live_sizes[s]);
        clobber();
        void* q = p.allocate(sizes[i], nullptr);
        touch(q);
        live[s] = q;
        live_sizes[s] = sizes[i];
    }
}

// What one run of a pattern reports: how many operations the counted region
// held, and what one operation is (pair, step, realloc, block).
struct outcome {
    std::size_t ops = 0;
    const char* unit = "pair";
};

// Runs `warm` uncounted steps, then `steps` counted ones, of the shared
// patterns. Warm-up: the free lists, page maps and thread caches the counted
// loop finds are the steady state's, not a cold start's.
template <class P>
outcome run_shared(std::string_view pattern, P& p, std::size_t steps, std::size_t warm) {
    outcome o;
    if (pattern == "pair") {
        pair_loop(p, warm);
        {
            counted_region r;
            pair_loop(p, steps);
        }
        o.ops = steps;
    } else if (pattern == "batch") {
        const auto sizes = batch_sizes();
        std::vector<void*> blocks(batch_blocks);
        const std::size_t batches = (steps + batch_blocks - 1) / batch_blocks;
        batch_loop(p, (warm + batch_blocks - 1) / batch_blocks, sizes.data(), blocks.data());
        {
            counted_region r;
            batch_loop(p, batches, sizes.data(), blocks.data());
        }
        o.ops = batches * batch_blocks;
    } else if (pattern == "random") {
        const random_inputs in(warm + steps);
        std::vector<void*> live(random_slots);
        std::vector<std::uint32_t> live_sizes(in.fill);
        for (std::size_t s = 0; s < random_slots; ++s) touch(live[s] = p.allocate(live_sizes[s], nullptr));
        random_loop(p, in.sizes.data(), in.slots.data(), warm, live.data(), live_sizes.data());
        {
            counted_region r;
            random_loop(p, in.sizes.data() + warm, in.slots.data() + warm, steps, live.data(), live_sizes.data());
        }
        for (std::size_t s = 0; s < random_slots; ++s) p.deallocate(live[s], live_sizes[s]);
        o.ops = steps;
        o.unit = "step";
    }
    return o;
}

inline constexpr const char* shared_patterns[] = {"pair", "batch", "random"};

// Warm-up: a tenth of the counted steps, at least a few thousand.
inline std::size_t warm_steps(std::size_t steps) noexcept { return steps / 10 > 5000 ? steps / 10 : 5000; }

[[noreturn]] inline void usage(const char* text) {
    std::fputs(text, stderr);
    std::exit(2);
}

} // namespace bench::instructions
