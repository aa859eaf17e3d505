// The Olden driver instantiated for the defero policy (see driver.hpp).
#include "olden/driver.hpp"

namespace bench::olden {

int drive_defero(const options& o) {
    counted<raw::defero_policy> p("defero");
    return drive(p, o, "defero");
}

} // namespace bench::olden
