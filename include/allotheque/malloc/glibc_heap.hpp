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
// and goes back to glibc. glibc's large blocks (128 KiB and up: a DEEPBIND
// plugin's buffer) are mappings of their own; one is recognised by the test
// glibc's free applies before it unmaps one (the chunk's IS_MMAPPED bit, its
// start and length on page boundaries), after mincore says the header's page
// is mapped: a pointer that passes is one glibc's free would unmap too.
// glibc's other arenas (small blocks a plugin's threads allocate) are not
// recognised: telling their heaps from other memory means trusting a pointer
// read from an address the page map knows nothing of. Those still abort.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
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

    [[nodiscard]] static bool owns(const void* p) noexcept { return in_main_heap(p) || is_mapped_chunk(p); }
    [[nodiscard]] static bool in_main_heap(const void* p) noexcept {
        const char* q = static_cast<const char*>(p);
        const char* s = start.load(std::memory_order_relaxed);
        // (void*)-1: the break could not be read. sbrk(0) reads glibc's
        // cached break without a system call.
        return s != nullptr && s != reinterpret_cast<char*>(-1) && q >= s && q < static_cast<const char*>(::sbrk(0));
    }
    // A chunk is two words before its block: the bytes of alignment padding
    // before it (mapped chunks only; 0 unless memalign moved the block), then
    // its size with the flags in the low three bits.
    static constexpr std::size_t is_mmapped = 2;
    [[nodiscard]] static bool is_mapped_chunk(const void* p) noexcept {
        const auto a = reinterpret_cast<std::uintptr_t>(p);
        const std::uintptr_t page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
        if (a % 16 != 0 || a < 16) return false;
        unsigned char resident;   // the header's 16 bytes share one page
        if (::mincore(reinterpret_cast<void*>((a - 16) & ~(page - 1)), 1, &resident) != 0) return false;
        std::size_t head[2];
        std::memcpy(head, reinterpret_cast<const void*>(a - 16), sizeof head);
        if (!(head[1] & is_mmapped) || head[0] > a - 16) return false;
        const std::uintptr_t block = a - 16 - head[0];
        const std::size_t total = head[0] + (head[1] & ~std::size_t{7});
        return (block | total) % page == 0 && total != 0;
    }
    static void free(void* p) noexcept { ::__libc_free(p); }
    static void* realloc(void* p, std::size_t n) noexcept { return ::__libc_realloc(p, n); }
    // glibc's malloc_usable_size is the symbol this library interposes: its
    // musable, the chunk's size less the header's two words for a mapped
    // chunk, less one for one in the main heap (whose next chunk's first word
    // is the block's).
    [[nodiscard]] static std::size_t usable(const void* p) noexcept {
        std::size_t size;
        std::memcpy(&size, static_cast<const char*>(p) - sizeof size, sizeof size);
        return (size & ~std::size_t{7}) - (size & is_mmapped ? 2 : 1) * sizeof size;
    }
};

}  // namespace allotheque::detail
