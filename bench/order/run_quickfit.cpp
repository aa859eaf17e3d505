// The order benchmark on quickfit_heap<> (see driver.hpp): a heap that places by
// size alone, beside the locality heaps (hints reach it and are ignored).
#include <allotheque/allocators/quickfit.hpp>

#include "order/driver.hpp"

namespace bench::order {

int drive_quickfit(const options& o) { return drive_heap<allotheque::quickfit_heap<>>(o, "quickfit"); }

} // namespace bench::order
