// Problem-size selector shared by every Olden program of the suite.
//   quick    : a smoke run, roughly 0.05-0.2 s per program with glibc malloc
//   standard : the size used for timing, roughly 0.3-1.5 s per program
//   full     : the inputs of the allotheque paper (Olden defaults)
#pragma once

namespace bench::olden {

enum class scale { quick, standard, full };

constexpr const char* to_string(scale s) noexcept {
    switch (s) {
    case scale::quick: return "quick";
    case scale::standard: return "standard";
    case scale::full: return "full";
    }
    return "?";
}

} // namespace bench::olden
