// The Olden driver instantiated for the quickfit policy (see driver.hpp).
#include "olden/driver.hpp"

namespace bench::olden {

int drive_quickfit(const options& o) {
    counted<raw::quickfit_policy> p("quickfit");
    return drive(p, o, "quickfit");
}

} // namespace bench::olden
