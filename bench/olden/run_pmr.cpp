// The Olden driver instantiated for the pmr policy (see driver.hpp).
#include "olden/driver.hpp"

namespace bench::olden {

int drive_pmr(const options& o) {
    counted<raw::pmr_policy> p;
    return drive(p, o, "pmr");
}

} // namespace bench::olden
