// The C++ runtime's part in operator new, reached without linking it.
//
// A malloc library that needs libstdc++ makes every program it is preloaded
// into load and relocate libstdc++, C programs included: a shell, make, each
// child of a posix_spawn storm pays about 1.6 ms an exec on the 2-vCPU VM.
// Only a failed operator new needs the runtime (the new_handler, bad_alloc),
// and a program that calls operator new has a runtime loaded. So the library
// refers to the three functions weakly (null in a C program; a static link
// resolves them too) and, failing that, looks in a runtime loaded later
// (a C++ plugin opened with RTLD_LOCAL). The library is linked --as-needed,
// so it names libstdc++ only if its own code needs more of it.
#pragma once
#include <dlfcn.h>

#include <cstddef>
#include <initializer_list>
#include <new>

#include <allotheque/detail/fail.hpp>

// The runtime's own symbols (the same in libstdc++ and libc++), declared
// under names of ours so that no standard header's declaration conflicts.
extern "C" {
[[gnu::weak]] std::new_handler allotheque_cxx_get_new_handler() noexcept __asm__("_ZSt15get_new_handlerv");
[[noreturn, gnu::weak]] void allotheque_cxx_throw_bad_alloc() __asm__("_ZSt17__throw_bad_allocv");
}

// The personality routine, which the unwind tables of any function with a
// catch or a noexcept boundary name, weakly too: null in a C program, where
// no C++ exception exists to unwind through them (a null personality lets an
// unwinder pass a frame). A library whose heap itself throws and catches
// (the Velox and Medius heaps' mapped tables) names the rest of the runtime
// strongly and so still loads libstdc++.
__asm__(".weak __gxx_personality_v0");

namespace allotheque::detail::cxx_runtime {

// name in the program's scope, else in a libstdc++ or libc++ already loaded.
[[gnu::cold]] inline void* find(const char* name) noexcept {
    if (void* f = ::dlsym(RTLD_DEFAULT, name)) return f;
    for (const char* lib : {"libstdc++.so.6", "libc++.so.1"}) {
        void* h = ::dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
        if (!h) continue;
        void* f = ::dlsym(h, name);
        ::dlclose(h);
        if (f) return f;
    }
    return nullptr;
}

// The installed new_handler; null when none is, or no runtime is loaded.
[[gnu::cold]] inline std::new_handler new_handler() noexcept {
    auto get = &allotheque_cxx_get_new_handler;
    if (!get) get = reinterpret_cast<std::new_handler (*)() noexcept>(find("_ZSt15get_new_handlerv"));
    return get ? get() : nullptr;
}

// Throws std::bad_alloc. With no runtime found (none loaded, or a fully
// static program that never links __throw_bad_alloc) nothing could catch it:
// the program ends with a message, as it would on an uncaught exception.
[[noreturn, gnu::cold]] inline void throw_bad_alloc() {
    auto thrower = &allotheque_cxx_throw_bad_alloc;
    if (!thrower) thrower = reinterpret_cast<void (*)()>(find("_ZSt17__throw_bad_allocv"));
    if (thrower) thrower();
    detail::fail("allotheque malloc", "out of memory, and no C++ runtime to throw std::bad_alloc",
                 "operator new", nullptr);
}

// Allocates through the runtime's nothrow operator new (RTLD_NEXT: this
// library defines its own), aligned to a when a is not 0, for an allocation
// with a new_handler installed: it calls our operator new inside its try
// block, so a handler that throws bad_alloc ends in nullptr as the standard
// asks, without a catch (and the personality routine it needs) here. False
// when the program has no such function after ours (this library linked
// statically).
[[gnu::cold]] inline bool next_nothrow_new(std::size_t n, std::size_t a, void*& p) noexcept {
    if (a == 0) {
        auto f = reinterpret_cast<void* (*)(std::size_t, const std::nothrow_t&) noexcept>(
            ::dlsym(RTLD_NEXT, "_ZnwmRKSt9nothrow_t"));
        if (f) p = f(n, std::nothrow_t{});
        return f != nullptr;
    }
    auto f = reinterpret_cast<void* (*)(std::size_t, std::align_val_t, const std::nothrow_t&) noexcept>(
        ::dlsym(RTLD_NEXT, "_ZnwmSt11align_val_tRKSt9nothrow_t"));
    if (f) p = f(n, std::align_val_t{a}, std::nothrow_t{});
    return f != nullptr;
}

} // namespace allotheque::detail::cxx_runtime
