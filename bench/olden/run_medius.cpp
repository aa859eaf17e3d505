// The Olden driver instantiated for the medius policy (see driver.hpp).
#include "olden/driver.hpp"

namespace bench::olden {

int drive_medius(const options& o) {
    counted<raw::medius_policy> p("medius");
    return drive(p, o, "medius");
}

} // namespace bench::olden
