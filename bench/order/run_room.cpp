// The order benchmark on the room_heap prototype (room_heap.hpp) over
// velox_heap<>, one instantiation per group size.
#include <allotheque/allocators/velox.hpp>

#include "order/driver.hpp"
#include "order/room_heap.hpp"

namespace bench::order {

int drive_room(const options& o) {
    using base = allotheque::velox_heap<>;
    const room_knobs k{o.fill, o.chain, o.spread};
    switch (o.group) {
    case 256: return drive_heap<room_heap<base, 256>>(o, "room", k);
    case 1024: return drive_heap<room_heap<base, 1024>>(o, "room", k);
    case 4096: return drive_heap<room_heap<base, 4096>>(o, "room", k);
    default: std::fprintf(stderr, "order: --group must be 256, 1024 or 4096\n"); return 2;
    }
}

} // namespace bench::order
