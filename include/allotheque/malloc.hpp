// A declared heap as the process's malloc. One .cpp file:
//
//   #include <allotheque/malloc.hpp>
//   #include <allotheque/allocators/quickfit.hpp>
//   struct my_malloc {
//       using heap = allotheque::quickfit_heap<allotheque::arena_source, allotheque::malloc_options>;
//       static constexpr const char* name = "my-quickfit";
//   };
//   ALLOTHEQUE_DEFINE_MALLOC(my_malloc);
//
// built as a shared library (LD_PRELOAD) or linked into a program, defines
// every symbol of the C malloc family (malloc, free, cfree, calloc, realloc,
// reallocarray, posix_memalign, aligned_alloc, memalign, valloc, pvalloc,
// malloc_usable_size, malloc_trim), every replaceable operator new/delete, and
// allotheque's own allotheque_malloc_heap_name/os_bytes/heap_count. CMake:
// allotheque_add_malloc() (cmake/AllothequeMalloc.cmake) builds it with the
// flags it needs. Define it in one translation unit of a program, at most.
//
// The declaration (malloc/declaration.hpp) must name a heap that satisfies
// malloc_heap (malloc/malloc_heap.hpp): a heap<> or block_heap<> over
// arena_source with 16-byte granularity, and free marks for heap<>;
// malloc_options gives both. Anything else is refused at compile time, with a
// message naming what is missing.
#pragma once
#include <malloc.h>
#include <stdlib.h>

#include <cstddef>
#include <new>

#include <allotheque/malloc/runtime.hpp>

#define ALLOTHEQUE_MALLOC_EXPORT __attribute__((visibility("default")))

// The entry points forward to malloc_runtime<Decl>, whose hot paths are inlined
// into each of them.
#define ALLOTHEQUE_DEFINE_MALLOC(Decl)                                                                                \
    static_assert(::allotheque::malloc_declaration_shape<Decl>,                                                      \
                  "ALLOTHEQUE_DEFINE_MALLOC: the declaration needs `using heap = ...;` and "                         \
                  "`static constexpr const char* name = ...;`");                                                     \
    static_assert(::allotheque::detail::check_malloc_heap<typename Decl::heap>());                                  \
    namespace allotheque_malloc_definition {                                                                         \
    using rt = ::allotheque::malloc_runtime<Decl>;                                                                   \
    }                                                                                                                 \
    extern "C" {                                                                                                      \
    ALLOTHEQUE_MALLOC_EXPORT void* malloc(size_t n) noexcept {                                                       \
        return allotheque_malloc_definition::rt::allocate(n, allotheque_malloc_definition::rt::min_align);           \
    }                                                                                                                 \
    ALLOTHEQUE_MALLOC_EXPORT void free(void* p) noexcept { allotheque_malloc_definition::rt::deallocate(p); }        \
    ALLOTHEQUE_MALLOC_EXPORT void cfree(void* p) noexcept { allotheque_malloc_definition::rt::deallocate(p); }       \
    ALLOTHEQUE_MALLOC_EXPORT void* calloc(size_t count, size_t size) noexcept {                                      \
        return allotheque_malloc_definition::rt::calloc(count, size);                                                \
    }                                                                                                                 \
    ALLOTHEQUE_MALLOC_EXPORT void* realloc(void* p, size_t n) noexcept {                                             \
        return allotheque_malloc_definition::rt::realloc(p, n);                                                      \
    }                                                                                                                 \
    ALLOTHEQUE_MALLOC_EXPORT void* reallocarray(void* p, size_t count, size_t size) noexcept {                       \
        size_t n;                                                                                                     \
        if (__builtin_mul_overflow(count, size, &n)) {                                                               \
            errno = ENOMEM;                                                                                           \
            return nullptr;                                                                                           \
        }                                                                                                             \
        return realloc(p, n);                                                                                         \
    }                                                                                                                 \
    ALLOTHEQUE_MALLOC_EXPORT int posix_memalign(void** out, size_t alignment, size_t n) noexcept {                   \
        return allotheque_malloc_definition::rt::posix_memalign(out, alignment, n);                                  \
    }                                                                                                                 \
    ALLOTHEQUE_MALLOC_EXPORT void* aligned_alloc(size_t alignment, size_t n) noexcept {                              \
        return allotheque_malloc_definition::rt::aligned_alloc(alignment, n);                                        \
    }                                                                                                                 \
    ALLOTHEQUE_MALLOC_EXPORT void* memalign(size_t alignment, size_t n) noexcept {                                   \
        return allotheque_malloc_definition::rt::memalign(alignment, n);                                             \
    }                                                                                                                 \
    ALLOTHEQUE_MALLOC_EXPORT void* valloc(size_t n) noexcept {                                                       \
        return allotheque_malloc_definition::rt::allocate(n, ::allotheque::detail::page_size);                       \
    }                                                                                                                 \
    ALLOTHEQUE_MALLOC_EXPORT void* pvalloc(size_t n) noexcept { return allotheque_malloc_definition::rt::pvalloc(n); } \
    ALLOTHEQUE_MALLOC_EXPORT size_t malloc_usable_size(void* p) noexcept {                                           \
        return allotheque_malloc_definition::rt::usable(p);                                                          \
    }                                                                                                                 \
    ALLOTHEQUE_MALLOC_EXPORT int malloc_trim(size_t) noexcept { return allotheque_malloc_definition::rt::trim_all(); } \
    /* Not part of any standard: lets a program (and the tests) check which library and heap serve it. */           \
    ALLOTHEQUE_MALLOC_EXPORT const char* allotheque_malloc_heap_name() {                                             \
        return allotheque_malloc_definition::rt::name;                                                               \
    }                                                                                                                 \
    ALLOTHEQUE_MALLOC_EXPORT size_t allotheque_malloc_os_bytes() noexcept {                                          \
        return allotheque_malloc_definition::rt::os_bytes();                                                         \
    }                                                                                                                 \
    ALLOTHEQUE_MALLOC_EXPORT size_t allotheque_malloc_heap_count() noexcept {                                        \
        return allotheque_malloc_definition::rt::heap_count();                                                       \
    }                                                                                                                 \
    ALLOTHEQUE_MALLOC_EXPORT int allotheque_malloc_stats(struct allotheque_stats* out) {                             \
        return allotheque_malloc_definition::rt::process_stats(out);                                                 \
    }                                                                                                                 \
    ALLOTHEQUE_MALLOC_EXPORT size_t allotheque_malloc_heap_stats(struct allotheque_stats* out, size_t max) {         \
        return allotheque_malloc_definition::rt::per_heap_stats(out, max);                                           \
    }                                                                                                                 \
    /* glibc's introspection, with allotheque's figures (docs/malloc.md). */                                        \
    ALLOTHEQUE_MALLOC_EXPORT void malloc_stats() noexcept { allotheque_malloc_definition::rt::print_stats(); }        \
    ALLOTHEQUE_MALLOC_EXPORT int malloc_info(int options, FILE* fp) noexcept {                                       \
        return allotheque_malloc_definition::rt::info(options, fp);                                                  \
    }                                                                                                                 \
    ALLOTHEQUE_MALLOC_EXPORT struct mallinfo2 mallinfo2() noexcept {                                                 \
        return allotheque_malloc_definition::rt::mall_info<struct mallinfo2>();                                      \
    }                                                                                                                 \
    ALLOTHEQUE_MALLOC_EXPORT struct mallinfo mallinfo() noexcept {                                                   \
        return allotheque_malloc_definition::rt::mall_info<struct mallinfo>();                                       \
    }                                                                                                                 \
    }                                                                                                                 \
    /* ALLOTHEQUE_SHOW_STATS: at exit (a destructor of the library or program). */                                   \
    [[gnu::destructor]] static void allotheque_malloc_show_stats_at_exit() noexcept {                                \
        allotheque_malloc_definition::rt::at_exit();                                                                 \
    }                                                                                                                 \
    ALLOTHEQUE_DEFINE_OPERATOR_NEW_DELETE(allotheque_malloc_definition::rt)

// Every replaceable allocation function, over a malloc_runtime R.
#define ALLOTHEQUE_DEFINE_OPERATOR_NEW_DELETE(R)                                                                      \
    ALLOTHEQUE_MALLOC_EXPORT void* operator new(std::size_t n) { return R::new_impl(n, R::min_align); }              \
    ALLOTHEQUE_MALLOC_EXPORT void* operator new[](std::size_t n) { return R::new_impl(n, R::min_align); }            \
    ALLOTHEQUE_MALLOC_EXPORT void* operator new(std::size_t n, const std::nothrow_t&) noexcept {                     \
        return R::new_nothrow(n, R::min_align);                                                                       \
    }                                                                                                                 \
    ALLOTHEQUE_MALLOC_EXPORT void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {                   \
        return R::new_nothrow(n, R::min_align);                                                                       \
    }                                                                                                                 \
    ALLOTHEQUE_MALLOC_EXPORT void* operator new(std::size_t n, std::align_val_t a) {                                 \
        return R::new_impl(n, R::fix_alignment(static_cast<std::size_t>(a)));                                        \
    }                                                                                                                 \
    ALLOTHEQUE_MALLOC_EXPORT void* operator new[](std::size_t n, std::align_val_t a) {                               \
        return R::new_impl(n, R::fix_alignment(static_cast<std::size_t>(a)));                                        \
    }                                                                                                                 \
    ALLOTHEQUE_MALLOC_EXPORT void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept { \
        return R::new_nothrow(n, R::fix_alignment(static_cast<std::size_t>(a)));                                    \
    }                                                                                                                 \
    ALLOTHEQUE_MALLOC_EXPORT void* operator new[](std::size_t n, std::align_val_t a,                                 \
                                                  const std::nothrow_t&) noexcept {                                  \
        return R::new_nothrow(n, R::fix_alignment(static_cast<std::size_t>(a)));                                     \
    }                                                                                                                 \
    ALLOTHEQUE_MALLOC_EXPORT void operator delete(void* p) noexcept { R::deallocate(p); }                            \
    ALLOTHEQUE_MALLOC_EXPORT void operator delete[](void* p) noexcept { R::deallocate(p); }                          \
    ALLOTHEQUE_MALLOC_EXPORT void operator delete(void* p, const std::nothrow_t&) noexcept { R::deallocate(p); }     \
    ALLOTHEQUE_MALLOC_EXPORT void operator delete[](void* p, const std::nothrow_t&) noexcept { R::deallocate(p); }   \
    ALLOTHEQUE_MALLOC_EXPORT void operator delete(void* p, std::size_t) noexcept { R::deallocate(p); }               \
    ALLOTHEQUE_MALLOC_EXPORT void operator delete[](void* p, std::size_t) noexcept { R::deallocate(p); }             \
    ALLOTHEQUE_MALLOC_EXPORT void operator delete(void* p, std::align_val_t) noexcept { R::deallocate(p); }          \
    ALLOTHEQUE_MALLOC_EXPORT void operator delete[](void* p, std::align_val_t) noexcept { R::deallocate(p); }        \
    ALLOTHEQUE_MALLOC_EXPORT void operator delete(void* p, std::size_t, std::align_val_t) noexcept {                 \
        R::deallocate(p);                                                                                             \
    }                                                                                                                 \
    ALLOTHEQUE_MALLOC_EXPORT void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {               \
        R::deallocate(p);                                                                                             \
    }                                                                                                                 \
    ALLOTHEQUE_MALLOC_EXPORT void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {       \
        R::deallocate(p);                                                                                             \
    }                                                                                                                 \
    ALLOTHEQUE_MALLOC_EXPORT void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {     \
        R::deallocate(p);                                                                                             \
    }                                                                                                                 \
    static_assert(true, "")
