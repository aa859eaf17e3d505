// The Olden driver instantiated for the segregated policy (see driver.hpp).
#include "olden/driver.hpp"

namespace bench::olden {

int drive_segregated(const options& o) {
    counted<raw::segregated_policy> p("segregated");
    return drive(p, o, "segregated");
}

} // namespace bench::olden
