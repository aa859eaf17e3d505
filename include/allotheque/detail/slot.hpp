// A member that exists only when a flag says so: `[[no_unique_address]]
// detail::slot<Present, T> m;` is a T, or an empty object that takes no room.
#pragma once
#include <type_traits>

namespace allotheque::detail {

struct empty_slot {};
template <bool Present, class T>
using slot = std::conditional_t<Present, T, empty_slot>;

} // namespace allotheque::detail
