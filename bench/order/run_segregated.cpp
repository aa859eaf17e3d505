// The order benchmark on segregated_heap<> (see driver.hpp): a heap that places by
// size alone, beside the locality heaps (hints reach it and are ignored).
#include <allotheque/allocators/segregated.hpp>

#include "order/driver.hpp"

namespace bench::order {

int drive_segregated(const options& o) { return drive_heap<allotheque::segregated_heap<>>(o, "segregated"); }

} // namespace bench::order
