// The Olden driver instantiated for the kingsley policy (see driver.hpp).
#include "olden/driver.hpp"

namespace bench::olden {

int drive_kingsley(const options& o) {
    counted<raw::kingsley_policy> p("kingsley");
    return drive(p, o, "kingsley");
}

} // namespace bench::olden
