// The Olden driver instantiated for the lea policy (see driver.hpp).
#include "olden/driver.hpp"

namespace bench::olden {

int drive_lea(const options& o) {
    counted<raw::lea_policy> p("lea");
    return drive(p, o, "lea");
}

} // namespace bench::olden
