// A downstream program: uses allotheque only through its CMake package / target.
#include <allotheque/version.hpp>

#if __has_include(<allotheque/allotheque.hpp>)
#include <allotheque/allotheque.hpp>
#endif

// Boost must arrive transitively through allotheque::allotheque (Boost::headers).
#include <boost/version.hpp>

#include <cstdio>

static_assert(__cplusplus >= 202002L, "allotheque::allotheque must request C++20");
static_assert(BOOST_VERSION >= 107400);
static_assert(allotheque::version_major == ALLOTHEQUE_VERSION_MAJOR);

int main() {
  std::printf("allotheque %.*s (%d.%d.%d) boost %d\n",
              static_cast<int>(allotheque::version_string.size()),
              allotheque::version_string.data(), ALLOTHEQUE_VERSION_MAJOR,
              ALLOTHEQUE_VERSION_MINOR, ALLOTHEQUE_VERSION_PATCH, BOOST_VERSION);
  return 0;
}
