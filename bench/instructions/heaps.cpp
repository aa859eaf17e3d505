// instructions_heaps: the header-only heaps' allocate + sized deallocate on
// the shared patterns (pair, batch, random), each inlined into the pattern's
// loop as a program calling heap.allocate(request{n}) gets it, beside the
// hand-written twins (twin.hpp) and the harness alone. One (heap, pattern)
// per process; bench/instructions/run.py runs it under callgrind.
//
//   instructions_heaps --heap NAME --pattern pair|batch|random|all [--steps N]
//
// Prints one JSON line per pattern: {"heap", "pattern", "ops", "unit", ...}.
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include <allotheque/allocators/segregated.hpp>
#include <allotheque/layers/per_thread.hpp>

#include "common/policies.hpp"
#include "instructions/measure.hpp"
#include "instructions/twin.hpp"

namespace {

using namespace bench::instructions;

// The twins' memory: static, so that the baseline makes no system call; sized
// for the shared patterns (every class's lists are reused in the steady state).
alignas(4096) std::byte twin_arena[std::size_t{64} << 20];

// The loops alone: an allocator that does nothing (every block is the same
// static buffer). What it counts is the harness's share of every other row.
struct harness_policy {
    alignas(64) static inline std::byte buffer[2048];
    [[gnu::always_inline]] void* allocate(std::size_t, const void*) noexcept { return buffer; }
    [[gnu::always_inline]] void deallocate(void* p, std::size_t) noexcept { escape(p); }
};

template <class P>
int run(const char* heap, std::string_view pattern, std::size_t steps, P& p) {
    // In a program an allocator's state is reachable from elsewhere; with its
    // address escaped the optimiser cannot keep free-list heads in registers
    // across the loop on the strength of this benchmark's closed world.
    escape(&p);
    const std::size_t warm = warm_steps(steps);
    for (const char* name : shared_patterns) {
        if (pattern != "all" && pattern != name) continue;
        const outcome o = run_shared(name, p, steps, warm);
        std::printf("{\"program\": \"heaps\", \"heap\": \"%s\", \"pattern\": \"%s\", \"ops\": %zu, \"unit\": \"%s\", "
                    "\"warm_up\": %zu, \"under_valgrind\": %s}\n",
                    heap, name, o.ops, o.unit, warm, under_valgrind() ? "true" : "false");
        std::fflush(stdout);
    }
    return 0;
}

template <class P, class... A>
int run_new(const char* heap, std::string_view pattern, std::size_t steps, A&&... a) {
    auto p = std::make_unique<P>(static_cast<A&&>(a)...);
    return run(heap, pattern, steps, *p);
}

template <class H>
using lib = bench::raw::heap_policy<H>;

} // namespace

int main(int argc, char** argv) {
    const char* heap = nullptr;
    std::string pattern = "all";
    std::size_t steps = 100'000;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string_view a = argv[i];
        if (a == "--heap") heap = argv[i + 1];
        else if (a == "--pattern") pattern = argv[i + 1];
        else if (a == "--steps") steps = std::strtoull(argv[i + 1], nullptr, 10);
        else heap = nullptr, i = argc;
    }
    if (!heap || steps == 0 ||
        (pattern != "all" && pattern != "pair" && pattern != "batch" && pattern != "random"))
        usage("usage: instructions_heaps --heap NAME --pattern pair|batch|random|all [--steps N]\n"
              "  heaps: segregated quickfit kingsley velox medius velox-classed medius-classed lea "
              "twin-segregated twin-quickfit twin-kingsley per_thread-segregated harness\n");
    const std::string_view h = heap;
    if (h == "segregated") return run_new<lib<allotheque::segregated_heap<>>>(heap, pattern, steps);
    if (h == "quickfit") return run_new<lib<allotheque::quickfit_heap<>>>(heap, pattern, steps);
    if (h == "kingsley") return run_new<lib<allotheque::kingsley_heap<>>>(heap, pattern, steps);
    if (h == "velox") return run_new<lib<allotheque::velox_heap<>>>(heap, pattern, steps);
    if (h == "medius") return run_new<lib<allotheque::medius_heap<>>>(heap, pattern, steps);
    if (h == "lea") return run_new<lib<allotheque::lea_heap<>>>(heap, pattern, steps);
    // Over the segregated heap's classes, as the Velox and Medius malloc libraries are.
    if (h == "velox-classed")
        return run_new<lib<allotheque::heap<allotheque::velox_classed_partition<>, allotheque::arena_source,
                                            allotheque::velox_heap_options>>>(heap, pattern, steps);
    if (h == "medius-classed")
        return run_new<lib<allotheque::heap<allotheque::medius_classed_partition<>, allotheque::arena_source,
                                            allotheque::medius_heap_options>>>(heap, pattern, steps);
    if (h == "twin-segregated")
        return run_new<twin_heap<segregated_classes>>(heap, pattern, steps, twin_arena, sizeof twin_arena);
    if (h == "twin-quickfit")
        return run_new<twin_heap<quickfit_classes>>(heap, pattern, steps, twin_arena, sizeof twin_arena);
    if (h == "twin-kingsley")
        return run_new<twin_heap<kingsley_classes>>(heap, pattern, steps, twin_arena, sizeof twin_arena);
    // The same heap behind layers::per_thread: what the thread lookup and the
    // owner check of a free add (the malloc library pays the same, in its own front).
    if (h == "per_thread-segregated")
        return run_new<lib<allotheque::layers::per_thread<allotheque::segregated_heap<>>>>(heap, pattern, steps);
    if (h == "harness") return run_new<harness_policy>(heap, pattern, steps);
    std::fprintf(stderr, "instructions_heaps: unknown heap '%s'\n", heap);
    return 2;
}
