// The order benchmark on medius_heap<> (see driver.hpp).
#include <allotheque/allocators/medius.hpp>

#include "order/driver.hpp"

namespace bench::order {

int drive_medius(const options& o) { return drive_heap<allotheque::medius_heap<>>(o, "medius"); }

} // namespace bench::order
