// The Olden driver instantiated for the kingsley_coalescing policy (see driver.hpp).
#include "olden/driver.hpp"

namespace bench::olden {

int drive_kingsley_coalescing(const options& o) {
    counted<raw::kingsley_coalescing_policy> p("kingsley_coalescing");
    return drive(p, o, "kingsley_coalescing");
}

} // namespace bench::olden
