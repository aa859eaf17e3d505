// Catch2 v2 runner, compiled once into allotheque_test_main.
// (With Catch2 v3 this file is unused: Catch2::Catch2WithMain provides main.)
#define CATCH_CONFIG_MAIN
#include "catch.hpp"
