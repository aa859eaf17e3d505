// instructions_heaps: the header-only heaps' allocate + sized deallocate on
// the shared patterns (pair, batch, random), each inlined into the pattern's
// loop as a program calling heap.allocate(request{n}) gets it, beside the
// hand-written twins (twin.hpp) and the harness alone. One (heap, pattern)
// per process; bench/instructions/run.py runs it under callgrind.
//
//   instructions_heaps --heap NAME --pattern pair|batch|random|all [--steps N]
//   instructions_heaps --list        (the heaps, one name a line)
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
#include <allotheque/malloc/shipped.hpp>

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

using runner = int (*)(const char* heap, std::string_view pattern, std::size_t steps);
template <class H>
int run_heap(const char* heap, std::string_view pattern, std::size_t steps) {
    return run_new<lib<H>>(heap, pattern, steps);
}
template <class Classes>
int run_twin(const char* heap, std::string_view pattern, std::size_t steps) {
    return run_new<twin_heap<Classes>>(heap, pattern, steps, twin_arena, sizeof twin_arena);
}

// Every row, in the report's order: the one list of them (run.py and the
// smoke test read it from --list).
struct row {
    const char* name;
    runner run;
};
constexpr row rows[] = {
    {"segregated", run_heap<allotheque::segregated_heap<>>},
    {"twin-segregated", run_twin<segregated_classes>},
    {"quickfit", run_heap<allotheque::quickfit_heap<>>},
    {"twin-quickfit", run_twin<quickfit_classes>},
    {"kingsley", run_heap<allotheque::kingsley_heap<>>},
    {"twin-kingsley", run_twin<kingsley_classes>},
    {"velox", run_heap<allotheque::velox_heap<>>},
    {"medius", run_heap<allotheque::medius_heap<>>},
    // The Velox and Medius malloc libraries' partitions (over the segregated
    // heap's classes), with the header-only heaps' options.
    {"velox-classed",
     run_heap<allotheque::heap<allotheque::malloc_declarations::velox::partition, allotheque::arena_source,
                               allotheque::velox_heap_options>>},
    {"medius-classed",
     run_heap<allotheque::heap<allotheque::malloc_declarations::medius::partition, allotheque::arena_source,
                               allotheque::medius_heap_options>>},
    {"lea", run_heap<allotheque::lea_heap<>>},
    // With deferred coalescing: the Lea malloc library's partition.
    {"lea_deferred", run_heap<allotheque::lea_deferred_heap<>>},
    // The same heap behind layers::per_thread: what the thread lookup and the
    // owner check of a free add (the malloc library pays the same, in its own front).
    {"per_thread-segregated", run_heap<allotheque::layers::per_thread<allotheque::segregated_heap<>>>},
    {"harness", [](const char* heap, std::string_view pattern, std::size_t steps) {
         return run_new<harness_policy>(heap, pattern, steps);
     }},
};

[[noreturn]] void print_usage() {
    std::string names;
    for (const row& r : rows) (names += ' ') += r.name;
    usage(("usage: instructions_heaps --heap NAME --pattern pair|batch|random|all [--steps N]\n"
           "       instructions_heaps --list\n"
           "  heaps:" + names + "\n").c_str());
}

} // namespace

int main(int argc, char** argv) {
    if (argc == 2 && std::string_view(argv[1]) == "--list") {
        for (const row& r : rows) std::printf("%s\n", r.name);
        return 0;
    }
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
        print_usage();
    for (const row& r : rows)
        if (std::string_view(r.name) == heap) return r.run(heap, pattern, steps);
    std::fprintf(stderr, "instructions_heaps: unknown heap '%s'\n", heap);
    return 2;
}
