// What a memory checker may know of a heap's chunks. The heaps take their
// memory from mmap in big spans, so AddressSanitizer and Valgrind's memcheck
// see one addressable region: without help an overrun into the next chunk or a
// write to a freed chunk goes unreported. When the program is built with ASan
// (or with ALLOTHEQUE_VALGRIND=1 and <valgrind/memcheck.h> at hand), the heaps
// tell the checker:
//   - a block handed out is addressable up to the size asked for; the rest of
//     its chunk is poisoned (so is every chunk never handed out yet);
//   - a freed chunk is poisoned but for its first `links` bytes, where the
//     partition threads its lists (the partition's min_chunk, and the double-
//     free mark when there is one): the library reads and writes those words
//     while the chunk is free, so they cannot be poisoned without every
//     container unpoisoning around each access;
//   - a span is wholly addressable again whenever it changes hands (opened by
//     a heap, given back to the system).
// So under a checker a block is the bytes asked for, not good_size or
// usable_size: a program that uses a chunk's rounding (usable_size's extra
// bytes) opens them with expose(), or builds with ALLOTHEQUE_POISON_TAILS=0
// (then only free chunks are poisoned).
// Without a checker every function here is empty and constant-folded away:
// `enabled` is false and the heaps test it with `if constexpr`.
#pragma once
#include <cstddef>

#if defined(__SANITIZE_ADDRESS__)
#define ALLOTHEQUE_POISON_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ALLOTHEQUE_POISON_ASAN 1
#endif
#endif

#if defined(ALLOTHEQUE_POISON_ASAN)
#include <sanitizer/asan_interface.h>
#endif
#if defined(ALLOTHEQUE_VALGRIND) && ALLOTHEQUE_VALGRIND
#include <valgrind/memcheck.h>
#define ALLOTHEQUE_POISON_VALGRIND 1
#endif

namespace allotheque::detail::poison {

#if defined(ALLOTHEQUE_POISON_ASAN) || defined(ALLOTHEQUE_POISON_VALGRIND)
inline constexpr bool enabled = true;
#else
inline constexpr bool enabled = false;
#endif
#if defined(ALLOTHEQUE_POISON_TAILS) && !ALLOTHEQUE_POISON_TAILS
inline constexpr bool tails = false;
#else
inline constexpr bool tails = true;
#endif

// [p, p+n) may not be touched.
inline void hide([[maybe_unused]] const void* p, [[maybe_unused]] std::size_t n) noexcept {
#if defined(ALLOTHEQUE_POISON_ASAN)
    if (n) __asan_poison_memory_region(p, n);
#endif
#if defined(ALLOTHEQUE_POISON_VALGRIND)
    if (n) VALGRIND_MAKE_MEM_NOACCESS(p, n);
#endif
}
// [p, p+n) may be read and written (what it holds counts as written: the
// heap's own words, or pages the system gave zeroed).
inline void expose([[maybe_unused]] const void* p, [[maybe_unused]] std::size_t n) noexcept {
#if defined(ALLOTHEQUE_POISON_ASAN)
    if (n) __asan_unpoison_memory_region(p, n);
#endif
#if defined(ALLOTHEQUE_POISON_VALGRIND)
    if (n) VALGRIND_MAKE_MEM_DEFINED(p, n);
#endif
}

// Chunk [p, p+chunk) handed out for a request of n bytes (zeroed: its bytes
// are all written). Called after the heap's own last write to the chunk.
inline void handed_out([[maybe_unused]] void* p, [[maybe_unused]] std::size_t n, [[maybe_unused]] std::size_t chunk,
                       [[maybe_unused]] bool zeroed) noexcept {
    if constexpr (!tails) n = chunk;
#if defined(ALLOTHEQUE_POISON_ASAN)
    __asan_poison_memory_region(p, chunk);
    if (n) __asan_unpoison_memory_region(p, n);
#endif
#if defined(ALLOTHEQUE_POISON_VALGRIND)
    VALGRIND_MAKE_MEM_NOACCESS(p, chunk);
    VALGRIND_MALLOCLIKE_BLOCK(p, n, 0, zeroed);
#endif
}

// Chunk [p, p+chunk) comes back: called before the heap reads or writes any
// of it (the double-free mark, the partition's links). links <= chunk: every
// chunk is at least the heap's min_chunk, which holds the links and the mark.
inline void freed([[maybe_unused]] void* p, [[maybe_unused]] std::size_t chunk,
                  [[maybe_unused]] std::size_t links) noexcept {
#if defined(ALLOTHEQUE_POISON_ASAN)
    __asan_poison_memory_region(p, chunk);
    __asan_unpoison_memory_region(p, links);
#endif
#if defined(ALLOTHEQUE_POISON_VALGRIND)
    VALGRIND_FREELIKE_BLOCK(p, 0);
    VALGRIND_MAKE_MEM_NOACCESS(p, chunk);
    VALGRIND_MAKE_MEM_DEFINED(p, links);
#endif
}

// A block grown or shrunk in place inside its chunk: now n bytes.
inline void resized([[maybe_unused]] void* p, [[maybe_unused]] std::size_t old_n, [[maybe_unused]] std::size_t n,
                    [[maybe_unused]] std::size_t chunk) noexcept {
    if constexpr (!tails) old_n = n = chunk;
#if defined(ALLOTHEQUE_POISON_ASAN)
    __asan_poison_memory_region(p, chunk);
    if (n) __asan_unpoison_memory_region(p, n);
#endif
#if defined(ALLOTHEQUE_POISON_VALGRIND)
    VALGRIND_RESIZEINPLACE_BLOCK(p, old_n, n, 0);
    if (n < chunk) VALGRIND_MAKE_MEM_NOACCESS(static_cast<char*>(p) + n, chunk - n);
#endif
}

} // namespace allotheque::detail::poison
