// The Olden driver instantiated for the malloc policy (see driver.hpp).
#include <allotheque/malloc_stats.h>

#include "olden/driver.hpp"

namespace bench::olden {

int drive_malloc(const options& o) {
    // The name says which malloc must be active; refuse to run (and record a
    // wrong baseline) when LD_PRELOAD did not take effect.
    // allotheque-<heap> names a library of this project: the heap behind it
    // must be <heap> too, or the row would be labelled with another heap.
    // The weak declaration resolves to the preloaded library's definition.
    std::string active = malloc_library();
    if (active == "allotheque")
        active += std::string("-") + (allotheque_malloc_heap_name ? allotheque_malloc_heap_name() : "unknown");
    if (o.allocator != "malloc" && o.allocator != active) {
        std::fprintf(stderr, "olden: allocator '%s' requested but the active malloc is '%s' (LD_PRELOAD?)\n",
                     o.allocator.c_str(), active.c_str());
        return 3;
    }
    counted<raw::malloc_policy> p;
    return drive(p, o, active.c_str());
}

std::vector<std::string> program_names() {
    std::vector<std::string> v;
    for (const auto& e : programs<counted<raw::malloc_policy>>()) v.emplace_back(e.name);
    return v;
}

} // namespace bench::olden
