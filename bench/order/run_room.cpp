// The order benchmark on layers::room over velox_heap<>: one instantiation per
// fill share (the layer's configuration is a template argument).
#include <allotheque/allocators/velox.hpp>
#include <allotheque/layers/room.hpp>

#include "order/driver.hpp"

namespace bench::order {

namespace {
template <unsigned Fill>
using room_velox = allotheque::layers::room<allotheque::velox_heap<>, allotheque::layers::room_config{.fill_percent = Fill}>;
}

int drive_room(const options& o) {
    switch (o.fill) {
    case 25: return drive_heap<room_velox<25>>(o, "room");
    case 50: return drive_heap<room_velox<50>>(o, "room");
    case 100: return drive_heap<room_velox<100>>(o, "room");
    default: std::fprintf(stderr, "order: --fill must be 25, 50 or 100 for --allocator room\n"); return 2;
    }
}

} // namespace bench::order
