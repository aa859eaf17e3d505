// The one place the library throws std::bad_alloc. Built without exceptions
// (-fno-exceptions: the shipped malloc libraries are), the same failure
// aborts, as the standard library's allocations do then.
#pragma once
#include <cstdlib>
#include <new>

namespace allotheque::detail {

// Out of line: inlined, the throw would keep the caller's request in memory
// and its registers saved on every allocation, not only on failure.
[[noreturn, gnu::noinline, gnu::cold]] inline void throw_bad_alloc() {
#if __cpp_exceptions
    throw std::bad_alloc();
#else
    std::abort();
#endif
}

} // namespace allotheque::detail
