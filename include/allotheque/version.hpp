// allotheque — version macros.
#ifndef ALLOTHEQUE_VERSION_HPP
#define ALLOTHEQUE_VERSION_HPP

#define ALLOTHEQUE_VERSION_MAJOR 0
#define ALLOTHEQUE_VERSION_MINOR 1
#define ALLOTHEQUE_VERSION_PATCH 0

// Single integer, e.g. 0.1.0 -> 100, 1.2.3 -> 10203.
#define ALLOTHEQUE_VERSION \
  (ALLOTHEQUE_VERSION_MAJOR * 10000 + ALLOTHEQUE_VERSION_MINOR * 100 + ALLOTHEQUE_VERSION_PATCH)

#include <string_view>

namespace allotheque {

inline constexpr int version_major = ALLOTHEQUE_VERSION_MAJOR;
inline constexpr int version_minor = ALLOTHEQUE_VERSION_MINOR;
inline constexpr int version_patch = ALLOTHEQUE_VERSION_PATCH;
inline constexpr std::string_view version_string = "0.1.0";

}  // namespace allotheque

#endif  // ALLOTHEQUE_VERSION_HPP
