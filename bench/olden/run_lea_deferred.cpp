// The Olden driver instantiated for the lea_deferred policy (see driver.hpp).
#include "olden/driver.hpp"

namespace bench::olden {

int drive_lea_deferred(const options& o) {
    counted<raw::lea_deferred_policy> p("lea_deferred");
    return drive(p, o, "lea_deferred");
}

} // namespace bench::olden
