// glibc_heap: the blocks of glibc's own malloc that reach this library's
// free, realloc or malloc_usable_size, and where they go instead.
//
// A preloaded malloc does not see every allocation of the process: a library
// opened with RTLD_DEEPBIND binds malloc to glibc's copy, and a program may
// call __libc_malloc itself. Their blocks are freed through the interposed
// free all the same; the page map holds no span there, and before this the
// program was aborted as if it had freed a foreign pointer. The page map
// cannot tell glibc's blocks from other memory, but the program break can:
// this library never moves it (arena_source maps its memory), so a pointer
// between the break at its start and the break now lies in glibc's main heap,
// and goes back to glibc. Only that heap: glibc's other arenas and its large
// blocks are mappings like any other, and guessing from their headers could
// hand glibc a pointer that is not its own; those still abort.
#pragma once
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstring>

extern "C" {
void __libc_free(void*) noexcept;
void* __libc_realloc(void*, std::size_t) noexcept;
}

namespace allotheque::detail {

struct glibc_heap {
    // The break when the first thread heap was made (malloc_threads' start,
    // before any block of this library existed), not a static initialiser:
    // the library has none. Null before that: no block is glibc's then.
    static inline constinit std::atomic<char*> start{nullptr};
    static void note_start() noexcept { start.store(static_cast<char*>(::sbrk(0)), std::memory_order_relaxed); }

    [[nodiscard]] static bool owns(const void* p) noexcept {
        const char* q = static_cast<const char*>(p);
        const char* s = start.load(std::memory_order_relaxed);
        // (void*)-1: the break could not be read. sbrk(0) reads glibc's
        // cached break without a system call.
        return s != nullptr && s != reinterpret_cast<char*>(-1) && q >= s && q < static_cast<const char*>(::sbrk(0));
    }
    static void free(void* p) noexcept { ::__libc_free(p); }
    static void* realloc(void* p, std::size_t n) noexcept { return ::__libc_realloc(p, n); }
    // glibc's malloc_usable_size is the symbol this library interposes; a
    // main-heap chunk (never mmapped there) keeps its size, flags in the low
    // three bits, in the word before the block, and all but that word is the
    // block's (glibc's musable for an in-use chunk).
    [[nodiscard]] static std::size_t usable(const void* p) noexcept {
        std::size_t size;
        std::memcpy(&size, static_cast<const char*>(p) - sizeof size, sizeof size);
        return (size & ~std::size_t{7}) - sizeof size;
    }
};

}  // namespace allotheque::detail
