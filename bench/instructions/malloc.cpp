// instructions_malloc: the malloc family's instructions per operation, through
// whatever malloc the process has (LD_PRELOAD for jemalloc, mimalloc, tcmalloc
// and the allotheque libraries; none for glibc). One (malloc, pattern) per
// process; bench/instructions/run.py runs it under callgrind and divides the
// counted instructions by the operations this program reports.
//
//   instructions_malloc --pattern NAME|all [--steps N] [--allocator malloc|harness]
//
//   pair     malloc(32), one store, free: per pair
//   batch    100 mallocs of 32..64 B, then their frees in the same order: per pair
//   random   1000 live slots; each step frees a random slot's block and puts
//            a random size (8..1024 B) there: per step (one free, one malloc)
//   realloc  malloc(16), then realloc up to 64 KiB by +16..256 B steps, free:
//            per realloc (the malloc and free shared among the ~480 reallocs)
//   calloc   calloc(1, 64), free: per pair
//   aligned  aligned_alloc(64, 48), free: per pair
//   new      operator new(32), one store, sized operator delete: per pair (what
//            a C++ program calls; its own entry points in every malloc)
//   remote   thread A mallocs a batch of 100 (32..64 B), thread B frees it;
//            both threads' counted loops, per block (one malloc, one free)
//
// --allocator harness replaces the malloc family with out-of-line functions
// that do nothing: the harness's own share of each row.
//
// Prints one JSON line per pattern, with the malloc library that is mapped in.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <semaphore>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <allotheque/malloc_stats.h>

#include "instructions/measure.hpp"
#include "process_memory.hpp"

namespace {

using namespace bench::instructions;

struct libc_malloc {
    void* allocate(std::size_t n, const void*) noexcept { return std::malloc(n); }
    void deallocate(void* p, std::size_t) noexcept { std::free(p); }
    void* zeroed(std::size_t count, std::size_t n) noexcept { return std::calloc(count, n); }
    void* resize(void* p, std::size_t n) noexcept { return std::realloc(p, n); }
    void* aligned(std::size_t a, std::size_t n) noexcept { return std::aligned_alloc(a, n); }
    void* create(std::size_t n) { return ::operator new(n); }
    void destroy(void* p, std::size_t n) noexcept { ::operator delete(p, n); }
};

// Out of line like a call into a shared library, and doing nothing: every
// block is one static buffer, large enough for the realloc chain.
alignas(64) std::byte harness_buffer[std::size_t{1} << 17];
[[gnu::noinline]] void* harness_take(std::size_t) noexcept {
    escape(harness_buffer);
    return harness_buffer;
}
[[gnu::noinline]] void harness_give(void* p) noexcept { escape(p); }

struct harness_malloc {
    void* allocate(std::size_t n, const void*) noexcept { return harness_take(n); }
    void deallocate(void* p, std::size_t) noexcept { harness_give(p); }
    void* zeroed(std::size_t, std::size_t n) noexcept { return harness_take(n); }
    void* resize(void*, std::size_t n) noexcept { return harness_take(n); }
    void* aligned(std::size_t, std::size_t n) noexcept { return harness_take(n); }
    void* create(std::size_t n) noexcept { return harness_take(n); }
    void destroy(void* p, std::size_t) noexcept { harness_give(p); }
};

// The realloc chain: 16 B up to 64 KiB by +16..256 B steps.
std::vector<std::uint32_t> realloc_chain() {
    rng r(4099);
    std::vector<std::uint32_t> v;
    for (std::uint32_t n = 16; n < 65536;) {
        n += r.between(16, 256);
        v.push_back(n < 65536 ? n : 65536);
    }
    return v;
}

template <class P>
[[gnu::noinline]] void realloc_loop(P& p, std::size_t rounds, const std::uint32_t* chain, std::size_t len) {
    for (std::size_t r = 0; r < rounds; ++r) {
        void* q = p.allocate(16, nullptr);
        touch(q);
        for (std::size_t i = 0; i < len; ++i) {
            q = p.resize(q, chain[i]);
            touch(static_cast<unsigned char*>(q) + chain[i] - 1);
        }
        p.deallocate(q, 0);
    }
}

template <class P>
[[gnu::noinline]] void calloc_loop(P& p, std::size_t steps) {
    for (std::size_t i = 0; i < steps; ++i) {
        void* q = p.zeroed(1, 64);
        touch(q);
        p.deallocate(q, 64);
    }
}

template <class P>
[[gnu::noinline]] void aligned_loop(P& p, std::size_t steps) {
    for (std::size_t i = 0; i < steps; ++i) {
        void* q = p.aligned(64, 48);
        touch(q);
        p.deallocate(q, 48);
    }
}

template <class P>
[[gnu::noinline]] void new_loop(P& p, std::size_t steps) {
    for (std::size_t i = 0; i < steps; ++i) {
        void* q = p.create(pair_size);
        touch(q);
        p.destroy(q, pair_size);
        clobber();
    }
}

template <class P>
[[gnu::noinline]] void allocate_batch(P& p, const std::uint32_t* sizes, void** blocks) {
    for (std::size_t i = 0; i < batch_blocks; ++i) {
        blocks[i] = p.allocate(sizes[i], nullptr);
        touch(blocks[i]);
    }
}

template <class P>
[[gnu::noinline]] void free_batch(P& p, const std::uint32_t* sizes, void* const* blocks) {
    for (std::size_t i = 0; i < batch_blocks; ++i) p.deallocate(blocks[i], sizes[i]);
}

// A and B take turns, so their counted regions never overlap: each counts its
// own loop only, whatever the scheduler (callgrind runs one thread at a time
// anyway). The hand-over itself is outside both regions.
template <class P>
outcome remote(P& p, std::size_t steps, std::size_t warm) {
    const auto sizes = batch_sizes();
    std::vector<void*> blocks(batch_blocks);
    const std::size_t warm_rounds = (warm + batch_blocks - 1) / batch_blocks;
    const std::size_t rounds = (steps + batch_blocks - 1) / batch_blocks;
    std::binary_semaphore full{0}, empty{0};
    std::thread b([&] {
        for (std::size_t r = 0; r < warm_rounds + rounds; ++r) {
            full.acquire();
            if (r < warm_rounds) {
                free_batch(p, sizes.data(), blocks.data());
            } else {
                counted_region c;
                free_batch(p, sizes.data(), blocks.data());
            }
            empty.release();
        }
    });
    for (std::size_t r = 0; r < warm_rounds + rounds; ++r) {
        if (r < warm_rounds) {
            allocate_batch(p, sizes.data(), blocks.data());
        } else {
            counted_region c;
            allocate_batch(p, sizes.data(), blocks.data());
        }
        full.release();
        empty.acquire();
    }
    b.join();
    return {rounds * batch_blocks, "block"};
}

template <class P>
outcome run_pattern(std::string_view pattern, P& p, std::size_t steps, std::size_t warm) {
    if (pattern == "realloc") {
        const auto chain = realloc_chain();
        const std::size_t rounds = (steps + chain.size() - 1) / chain.size();
        realloc_loop(p, (warm + chain.size() - 1) / chain.size(), chain.data(), chain.size());
        {
            counted_region r;
            realloc_loop(p, rounds, chain.data(), chain.size());
        }
        return {rounds * chain.size(), "realloc"};
    }
    if (pattern == "calloc" || pattern == "aligned" || pattern == "new") {
        auto loop = pattern == "calloc" ? calloc_loop<P> : pattern == "aligned" ? aligned_loop<P> : new_loop<P>;
        loop(p, warm);
        {
            counted_region r;
            loop(p, steps);
        }
        return {steps, "pair"};
    }
    if (pattern == "remote") return remote(p, steps, warm);
    return run_shared(pattern, p, steps, warm);
}

constexpr const char* patterns[] = {"pair", "batch", "random", "realloc", "calloc", "aligned", "new", "remote"};

// The heap an allotheque malloc library names, or nullptr for any other malloc
// (the weak declaration of <allotheque/malloc_stats.h> is null without one).
const char* allotheque_heap() { return allotheque_malloc_heap_name ? allotheque_malloc_heap_name() : nullptr; }

// What a smoke run (no valgrind) can check of the blocks themselves.
bool blocks_ok() {
    void* a = std::aligned_alloc(64, 48);
    auto* z = static_cast<unsigned char*>(std::calloc(1, 64));
    bool ok = a && reinterpret_cast<std::uintptr_t>(a) % 64 == 0 && z;
    for (int i = 0; z && i < 64; ++i) ok = ok && z[i] == 0;
    std::free(a);
    std::free(z);
    return ok;
}

template <class P>
int run(const char* allocator, std::string_view pattern, std::size_t steps) {
    P p;
    const std::size_t warm = warm_steps(steps);
    const char* heap = allotheque_heap();
    for (const char* name : patterns) {
        if (pattern != "all" && pattern != name) continue;
        const outcome o = run_pattern(name, p, steps, warm);
        std::printf("{\"program\": \"malloc\", \"allocator\": \"%s\", \"pattern\": \"%s\", \"ops\": %zu, "
                    "\"unit\": \"%s\", \"warm_up\": %zu, \"malloc_library\": \"%s\", \"allotheque_heap\": %s%s%s, "
                    "\"under_valgrind\": %s}\n",
                    allocator, name, o.ops, o.unit, warm, allotheque::tools::malloc_library(), heap ? "\"" : "",
                    heap ? heap : "null", heap ? "\"" : "", under_valgrind() ? "true" : "false");
        std::fflush(stdout);
    }
    return blocks_ok() ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
    std::string pattern;
    std::string allocator = "malloc";
    std::size_t steps = 100'000;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string_view a = argv[i];
        if (a == "--pattern") pattern = argv[i + 1];
        else if (a == "--steps") steps = std::strtoull(argv[i + 1], nullptr, 10);
        else if (a == "--allocator") allocator = argv[i + 1];
        else pattern.clear(), i = argc;
    }
    bool known = pattern == "all";
    for (const char* name : patterns) known = known || pattern == name;
    if (!known || steps == 0 || (allocator != "malloc" && allocator != "harness"))
        usage("usage: instructions_malloc --pattern pair|batch|random|realloc|calloc|aligned|new|remote|all "
              "[--steps N] [--allocator malloc|harness]\n");
    if (allocator == "harness") return run<harness_malloc>("harness", pattern, steps);
    return run<libc_malloc>("malloc", pattern, steps);
}
