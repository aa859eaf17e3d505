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
// Small blocks a plugin's threads allocate lie in glibc's other arenas,
// whose heaps are 64 MiB-aligned mappings that begin with a heap_info
// naming their arena (glibc's own free finds the arena that way): a chunk
// with the NON_MAIN_ARENA bit is taken for glibc's when the heap_info at its
// 64 MiB boundary names an arena 32 to 64 bytes past a 64 MiB boundary (an
// arena lives in its first heap, just past the heap_info) whose heap_info
// names that arena too, and the chunk lies inside the heap's current size.
// In an arena's first heap this is a word at the boundary pointing just past
// itself: a signature a stray pointer meets only in memory laid out like
// glibc's. Every page read is first checked mapped (mincore). Anything else
// aborts as a foreign pointer.
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

    [[nodiscard]] static bool owns(const void* p) noexcept {
        return in_main_heap(p) || is_mapped_chunk(p) || in_other_arena(p);
    }
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
        if (a % 16 != 0 || a < 16 || !mapped(a - 16)) return false;   // the header's 16 bytes share one page
        std::size_t head[2];
        std::memcpy(head, reinterpret_cast<const void*>(a - 16), sizeof head);
        if (!(head[1] & is_mmapped) || head[0] > a - 16) return false;
        const std::uintptr_t block = a - 16 - head[0];
        const std::size_t total = head[0] + (head[1] & ~std::size_t{7});
        return (block | total) % kernel_page() == 0 && total != 0;
    }
    // heap_info's first and third words (arena, size) in every glibc since
    // 2.26; the heaps' alignment is HEAP_MAX_SIZE, 64 MiB on 64-bit (unless
    // glibc.malloc.hugetlb asks for huge pages: then not recognised).
    static constexpr std::uintptr_t heap_max_size = std::uintptr_t{64} << 20;
    static constexpr std::size_t non_main_arena = 4;
    static constexpr std::uintptr_t heap_info_max_bytes = 64;
    [[nodiscard]] static bool in_other_arena(const void* p) noexcept {
        const auto a = reinterpret_cast<std::uintptr_t>(p);
        if (a % 16 != 0 || a < heap_max_size) return false;
        const std::uintptr_t chunk = a - 16, heap = chunk & ~(heap_max_size - 1);
        if (!mapped(chunk) || !mapped(heap)) return false;
        std::size_t size;
        std::memcpy(&size, reinterpret_cast<const void*>(chunk + 8), sizeof size);
        if ((size & (non_main_arena | is_mmapped)) != non_main_arena || size > heap_max_size) return false;
        std::uintptr_t info[3];   // arena, previous heap, size
        std::memcpy(info, reinterpret_cast<const void*>(heap), sizeof info);
        if (chunk < heap + heap_info_max_bytes || chunk + (size & ~std::size_t{7}) > heap + info[2] ||
            info[2] > heap_max_size)
            return false;
        const std::uintptr_t arena = info[0], first = arena & ~(heap_max_size - 1);
        if (arena - first < 32 || arena - first > heap_info_max_bytes) return false;
        if (first != heap && !mapped(first)) return false;
        std::uintptr_t named;
        std::memcpy(&named, reinterpret_cast<const void*>(first), sizeof named);
        return named == arena;
    }
    [[nodiscard]] static bool mapped(std::uintptr_t a) noexcept {
        unsigned char resident;
        return ::mincore(reinterpret_cast<void*>(a & ~(kernel_page() - 1)), 1, &resident) == 0;
    }
    // glibc's mapped chunks and mincore go by the kernel's page, which
    // detail::page_size (the library's unit, 4 KiB) need not be. Asked each
    // time: these paths are cold, and a cached static would need a guard.
    [[nodiscard]] static std::uintptr_t kernel_page() noexcept {
        return static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
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
