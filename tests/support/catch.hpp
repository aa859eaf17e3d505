// Test-side include shim: tests write `#include "catch.hpp"` and get Catch2 v2
// or v3 depending on what CMake found (ALLOTHEQUE_CATCH2_V3 is set by
// tests/CMakeLists.txt when Catch2 3.x is used).
#pragma once

#if defined(ALLOTHEQUE_CATCH2_V3)
#include <catch2/catch_all.hpp>
#else
#include <catch2/catch.hpp>
#endif
