// The Olden driver instantiated for the malloc policy (see driver.hpp).
#include "olden/driver.hpp"

namespace bench::olden {

int drive_malloc(const options& o) {
    // The name says which malloc must be active; refuse to run (and record a
    // wrong baseline) when LD_PRELOAD did not take effect.
    const std::string active = malloc_library();
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
