// The order benchmark on velox_heap<> (see driver.hpp).
#include <allotheque/allocators/velox.hpp>

#include "order/driver.hpp"

namespace bench::order {

int drive_velox(const options& o) { return drive_heap<allotheque::velox_heap<>>(o, "velox"); }

} // namespace bench::order
