// The Olden driver instantiated for the velox policy (see driver.hpp).
#include "olden/driver.hpp"

namespace bench::olden {

int drive_velox(const options& o) {
    counted<raw::velox_policy> p("velox");
    return drive(p, o, "velox");
}

} // namespace bench::olden
