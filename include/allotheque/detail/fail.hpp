// Abort with a message on standard error, for misuse a heap detects (a double
// free, a pointer it never handed out). It writes with write(2) and formats
// the pointer itself: it may run inside malloc, where printf could allocate.
#pragma once
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>

namespace allotheque::detail {

// n bytes to a file descriptor, through short writes; gives up on an error.
inline void write_all(int fd, const char* s, std::size_t n) noexcept {
    while (n > 0) {
        const ssize_t w = ::write(fd, s, n);
        if (w <= 0) return;
        s += w;
        n -= static_cast<std::size_t>(w);
    }
}

inline void write_err(const char* s) noexcept {
    std::size_t n = 0;
    while (s[n]) ++n;
    write_all(2, s, n);
}

// "<who>: <what>[ in <where>]: 0x<pointer>" and abort(). Never inlined: a
// copy of its formatting in a cold caller counts against g++'s growth limit
// for the whole unit (one such call in arena_source::move cost the Lea
// library's malloc+free 11 instructions, pair 201 -> 212).
[[noreturn, gnu::cold, gnu::noinline]] inline void fail(const char* who, const char* what, const char* where,
                                                     const void* p) noexcept {
    char hex[2 + 16 + 2] = "0x";
    auto v = reinterpret_cast<std::uintptr_t>(p);
    for (int i = 0; i < 16; ++i) hex[2 + i] = "0123456789abcdef"[(v >> (60 - 4 * i)) & 0xf];
    hex[18] = '\n';
    hex[19] = '\0';
    write_err(who);
    write_err(": ");
    write_err(what);
    if (where) {
        write_err(" in ");
        write_err(where);
    }
    write_err(": ");
    write_err(hex);
    std::abort();
}
[[noreturn, gnu::cold, gnu::noinline]] inline void fail(const char* who, const char* what, const void* p) noexcept {
    fail(who, what, nullptr, p);
}

} // namespace allotheque::detail
