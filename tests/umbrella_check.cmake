# Checks that include/allotheque/allotheque.hpp includes every public header
# (everything under include/allotheque/ except detail/ and itself), so that
# `#include <allotheque/allotheque.hpp>` really is everything. The malloc
# headers (malloc.hpp, malloc/) are left out on purpose: they make a heap the
# process's malloc, are Linux/ELF only (malloc.h, pthread), and a program
# includes them by choice, in one file.
#   cmake -DINCLUDE_DIR=<repo>/include -P umbrella_check.cmake
if(NOT DEFINED INCLUDE_DIR)
  message(FATAL_ERROR "umbrella_check.cmake: INCLUDE_DIR not set")
endif()
get_filename_component(INCLUDE_DIR "${INCLUDE_DIR}" ABSOLUTE)   # GLOB RELATIVE needs it
file(READ "${INCLUDE_DIR}/allotheque/allotheque.hpp" umbrella)
file(GLOB_RECURSE headers RELATIVE "${INCLUDE_DIR}" "${INCLUDE_DIR}/allotheque/*.hpp")
list(SORT headers)
set(missing "")
foreach(h IN LISTS headers)
  if(h MATCHES "^allotheque/(detail|malloc)/" OR h STREQUAL "allotheque/allotheque.hpp"
     OR h STREQUAL "allotheque/malloc.hpp")
    continue()
  endif()
  string(FIND "${umbrella}" "#include <${h}>" at)
  if(at EQUAL -1)
    list(APPEND missing "${h}")
  endif()
endforeach()
if(missing)
  list(JOIN missing "\n  " text)
  message(FATAL_ERROR "allotheque.hpp does not include:\n  ${text}")
endif()
message(STATUS "allotheque.hpp includes every public header")
