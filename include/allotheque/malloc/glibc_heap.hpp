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
// whose heaps are 64 MiB-aligned mappings (8 MiB under
// glibc.malloc.hugetlb=2) that begin with a heap_info
// naming their arena (glibc's own free finds the arena that way): a chunk
// with the NON_MAIN_ARENA bit is taken for glibc's when the heap_info at its
// heap boundary names an arena 32 to 64 bytes past such a boundary (an
// arena lives in its first heap, just past the heap_info) whose heap_info
// names that arena too, and the chunk lies inside the heap's current size.
// In an arena's first heap this is a word at the boundary pointing just past
// itself: a signature a stray pointer meets only in memory laid out like
// glibc's. Where GLIBC_TUNABLES asks glibc for huge pages
// (glibc.malloc.hugetlb=2 or a page size, glibc 2.35 and later), glibc never
// moves the break: its main heap is mappings of its own, anywhere, with no
// boundary to vouch for a chunk. There, and only there, a chunk without the
// NON_MAIN_ARENA and IS_MMAPPED bits is taken for glibc's on the checks
// glibc's own free makes: a sane size, and a next chunk, mapped, with a sane
// size and the bit that says this one is in use. That is weaker than the
// rest (memory laid out like a glibc chunk passes, and glibc's free judges
// it), the price of not aborting such a program's correct frees. Every page
// read is first checked mapped (mincore). Anything else aborts as a foreign
// pointer.
#pragma once
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
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
    // GLIBC_TUNABLES is read here too, as near glibc's own reading as the
    // library gets, before the program can change its environment.
    static void note_start() noexcept {
        start.store(static_cast<char*>(::sbrk(0)), std::memory_order_relaxed);
        note_huge_heap();
    }

    // Each test out of line and cold: inlined into the three cold callers in
    // the malloc's unit, the tests' growth moved g++'s inlining of hot code
    // there (block_heap's deallocate left the Lea library's free: 201 -> 212
    // instructions a malloc+free; the segregated library's aligned pair 91
    // -> 102). Out of line, every count is as before the tests grew.
    [[nodiscard, gnu::noinline, gnu::cold]] static bool owns(const void* p) noexcept {
        return in_main_heap(p) || is_mapped_chunk(p) || in_other_arena(p) || in_main_mapping(p);
    }
    [[nodiscard, gnu::noinline, gnu::cold]] static bool in_main_heap(const void* p) noexcept {
        const char* q = static_cast<const char*>(p);
        const char* s = start.load(std::memory_order_relaxed);
        // (void*)-1: the break could not be read. sbrk(0) reads glibc's
        // cached break without a system call.
        return s != nullptr && s != reinterpret_cast<char*>(-1) && q >= s && q < static_cast<const char*>(::sbrk(0));
    }
    // A chunk is two words before its block: the bytes of alignment padding
    // before it (mapped chunks only; 0 unless memalign moved the block), then
    // its size with the flags in the low three bits.
    static constexpr std::size_t prev_inuse = 1, is_mmapped = 2, non_main_arena = 4;
    // Block a's chunk header, where a is aligned as glibc's blocks are and
    // the header's page is mapped (its 16 bytes share one page).
    [[nodiscard]] static bool read_header(std::uintptr_t a, std::size_t (&head)[2]) noexcept {
        if (a % 16 != 0 || a < 16 || !mapped(a - 16)) return false;
        std::memcpy(head, reinterpret_cast<const void*>(a - 16), sizeof head);
        return true;
    }
    [[nodiscard, gnu::noinline, gnu::cold]] static bool is_mapped_chunk(const void* p) noexcept {
        const auto a = reinterpret_cast<std::uintptr_t>(p);
        std::size_t head[2];
        if (!read_header(a, head) || !(head[1] & is_mmapped) || head[0] > a - 16) return false;
        const std::uintptr_t block = a - 16 - head[0];
        const std::size_t total = head[0] + (head[1] & ~std::size_t{7});
        return (block | total) % kernel_page() == 0 && total != 0;
    }
    // heap_info's first and third words (arena, size) in every glibc since
    // 2.26. The heaps are aligned to their largest size, HEAP_MAX_SIZE (64
    // MiB on 64-bit), or four huge pages where glibc.malloc.hugetlb asks for
    // them (2.35 and later): 8 MiB with 2 MiB pages, though no huge page is
    // reserved (glibc then maps small pages, aligned as for huge ones).
    // Both are tried, the signature deciding: glibc may have ignored the
    // tunable (a setuid program).
    static constexpr std::uintptr_t heap_max_size = std::uintptr_t{64} << 20;
    static constexpr std::uintptr_t heap_info_max_bytes = 64;
    [[nodiscard, gnu::noinline, gnu::cold]] static bool in_other_arena(const void* p) noexcept {
        if (in_other_arena(p, heap_max_size)) return true;
        const std::uintptr_t huge = huge_heap_size();
        return huge != 0 && huge != heap_max_size && in_other_arena(p, huge);
    }
    [[nodiscard]] static bool in_other_arena(const void* p, std::uintptr_t heap_bytes) noexcept {
        const auto a = reinterpret_cast<std::uintptr_t>(p);
        std::size_t head[2];
        if (a < heap_bytes || !read_header(a, head)) return false;
        const std::uintptr_t chunk = a - 16, heap = chunk & ~(heap_bytes - 1);
        const std::size_t size = head[1];
        if (!mapped(heap) || (size & (non_main_arena | is_mmapped)) != non_main_arena || size > heap_bytes)
            return false;
        std::uintptr_t info[3];   // arena, previous heap, size
        std::memcpy(info, reinterpret_cast<const void*>(heap), sizeof info);
        if (chunk < heap + heap_info_max_bytes || chunk + (size & ~std::size_t{7}) > heap + info[2] ||
            info[2] > heap_bytes)
            return false;
        const std::uintptr_t arena = info[0], first = arena & ~(heap_bytes - 1);
        if (arena - first < 32 || arena - first > heap_info_max_bytes) return false;
        if (first != heap && !mapped(first)) return false;
        std::uintptr_t named;
        std::memcpy(&named, reinterpret_cast<const void*>(first), sizeof named);
        return named == arena;
    }
    // A main-heap chunk where glibc's main heap is off the break (huge pages
    // asked for), judged as glibc's free judges one.
    [[nodiscard, gnu::noinline, gnu::cold]] static bool in_main_mapping(const void* p) noexcept {
        if (huge_heap_size() == 0) return false;
        const auto a = reinterpret_cast<std::uintptr_t>(p);
        std::size_t head[2];
        if (!read_header(a, head)) return false;
        const std::size_t size = head[1], bytes = size & ~std::size_t{7};
        if (size & (non_main_arena | is_mmapped) || bytes < 32 || bytes % 16 != 0) return false;
        const std::uintptr_t next = a - 16 + bytes;   // 16-aligned: its header shares one page
        if (next < a || !mapped(next)) return false;
        std::size_t next_size;
        std::memcpy(&next_size, reinterpret_cast<const void*>(next + 8), sizeof next_size);
        const std::size_t next_bytes = next_size & ~std::size_t{7};
        return (next_size & (prev_inuse | non_main_arena | is_mmapped)) == prev_inuse && next_bytes >= 16 &&
               next_bytes % 16 == 0;
    }
    // glibc's heap alignment under glibc.malloc.hugetlb (GLIBC_TUNABLES,
    // read once, at the library's start as glibc reads it at its own):
    // four times the huge page, the system's default one (/proc/meminfo's
    // Hugepagesize) for 2, the value itself for a page size; 0 where the
    // tunable asks for none. Neither getenv nor the reads below allocate.
    static inline constinit std::atomic<std::uintptr_t> huge_heap{~std::uintptr_t{0}};
    [[nodiscard]] static std::uintptr_t huge_heap_size() noexcept {
        const std::uintptr_t v = huge_heap.load(std::memory_order_relaxed);
        return v != ~std::uintptr_t{0} ? v : note_huge_heap();
    }
    [[gnu::noinline, gnu::cold]] static std::uintptr_t note_huge_heap() noexcept {
        const std::uintptr_t v = 4 * huge_page_asked(std::getenv("GLIBC_TUNABLES"));
        huge_heap.store(v, std::memory_order_relaxed);
        return v;
    }
    // The huge page glibc.malloc.hugetlb=N asks for (0: none), from the
    // tunables string; the last setting wins, as in glibc.
    [[nodiscard]] static std::uintptr_t huge_page_asked(const char* tunables) noexcept {
        static constexpr char key[] = "glibc.malloc.hugetlb=";
        std::uintptr_t asked = 0;
        for (const char* t = tunables; t && *t;) {
            // Base 0, as glibc reads tunables: 0x hexadecimal, 0 octal.
            if (std::strncmp(t, key, sizeof key - 1) == 0) asked = std::strtoull(t + sizeof key - 1, nullptr, 0);
            t = std::strchr(t, ':');
            if (t) ++t;
        }
        if (asked == 2) asked = default_huge_page();
        // Not a page size: glibc finds no such huge page and asks for none.
        return asked >= 4096 && (asked & (asked - 1)) == 0 ? asked : 0;
    }
    // /proc/meminfo's "Hugepagesize: N kB", in bytes (0 when absent).
    [[nodiscard]] static std::uintptr_t default_huge_page() noexcept {
        char buf[8192];
        const int fd = ::open("/proc/meminfo", O_RDONLY | O_CLOEXEC);
        if (fd < 0) return 0;
        std::size_t got = 0;
        for (ssize_t k; got < sizeof buf - 1 && (k = ::read(fd, buf + got, sizeof buf - 1 - got)) > 0;)
            got += static_cast<std::size_t>(k);
        ::close(fd);
        buf[got] = '\0';
        const char* line = std::strstr(buf, "Hugepagesize:");
        if (!line) return 0;
        return std::strtoull(line + sizeof "Hugepagesize:" - 1, nullptr, 10) * 1024;
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
