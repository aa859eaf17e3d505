// liballotheque_malloc.so: the C malloc family and the C++ operator new/delete
// family served by an allotheque heap, for LD_PRELOAD or linking.
//
// The heap (chosen at configure time, ALLOTHEQUE_MALLOC_HEAP):
//   lea     lea_heap<mmap_source>: boundary tags give free(p) and usable_size(p)
//           directly; alignments above a page are over-allocated (see lea_backend)
//   velox   layers::page_map or layers::sized over velox_heap  (ALLOTHEQUE_MALLOC_LAYER)
//   medius  layers::page_map or layers::sized over medius_heap
// velox/medius requests carry the heap's last_allocation() as their hint.
//
// Thread safety: ONE global heap behind ONE pthread mutex. Correct for any
// pattern (a block may be freed by any thread) but it serialises allocation;
// per-thread heaps are future work (cross-thread frees would need an owner
// lookup and a remote-free queue).
//
// Fork: pthread_atfork handlers take the lock before fork() and release it in
// the parent and the child, so the child never inherits a heap mid-update.
//
// Initialisation: no static constructor allocates. The heap lives in a static,
// suitably aligned buffer and is constructed by placement new on the first
// call, under the (statically initialised) mutex; the heap's sources call mmap
// directly, never malloc. The atfork handlers are registered after that, with
// the lock released (pthread_atfork may itself call malloc). The heap is never
// destroyed: blocks freed during exit must stay valid.
//
// Errors: every allocation failure sets errno = ENOMEM (EINVAL for a bad
// alignment where POSIX says so). operator new loops on the new_handler and
// throws std::bad_alloc; the nothrow forms return nullptr. Exceptions never
// cross the C entry points (all noexcept).
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>

#include <allotheque/detail/bits.hpp>
#include <allotheque/heap_options.hpp>
#include <allotheque/request.hpp>
#include <allotheque/sources/mmap_source.hpp>
#include <allotheque/sources/sbrk_source.hpp>

#if defined(ALLOTHEQUE_MALLOC_HEAP_VELOX) || defined(ALLOTHEQUE_MALLOC_HEAP_MEDIUS)
#include <allotheque/allocators/medius.hpp>
#include <allotheque/allocators/velox.hpp>
#include <allotheque/layers/page_map.hpp>
#include <allotheque/layers/sized.hpp>
#else
#define ALLOTHEQUE_MALLOC_HEAP_LEA 1
#include <allotheque/allocators/lea.hpp>
#include <allotheque/containers/adjacency.hpp>
#endif

#define ALLOTHEQUE_EXPORT __attribute__((visibility("default")))

namespace {

namespace at = allotheque;

#if defined(ALLOTHEQUE_MALLOC_SOURCE_SBRK)
using source = at::sbrk_source;
#else
using source = at::mmap_source;
#endif

constexpr std::size_t min_align = 16;

#if defined(ALLOTHEQUE_MALLOC_HEAP_LEA)
// lea_heap serves alignments up to a page itself, but maps each such block on
// its own. So (except for big blocks) ask it for n + a + 32 bytes and hand out the first a-aligned address at least 32 bytes
// in; the 16 bytes before it imitate a boundary tag whose head carries the
// flag `redirect` (bit 3, which lea never sets) and the distance back to the
// real block, so free(p) and usable_size(p) find it.
class lea_backend {
    using tags = at::boundary_tags;
    static constexpr std::size_t redirect = 8;

public:
    static constexpr const char* name = "lea";

    void* allocate(std::size_t n, std::size_t a) noexcept {
        if (a <= min_align) return heap_.try_allocate(at::request{n, nullptr, 0});
        if (n > heap_type::max_size - a - 32) return nullptr;
        // lea maps every block aligned beyond 16 on its own: right for big ones,
        // a page or more per block for small ones, which are over-allocated here.
        if (a <= heap_type::max_alignment && n + a + 32 > at::heap_options<>::large_threshold)
            return heap_.try_allocate(at::request{n, nullptr, a});
        auto* base = static_cast<std::byte*>(heap_.try_allocate(at::request{n + a + 32, nullptr, 0}));
        if (!base) return nullptr;
        auto* p = reinterpret_cast<std::byte*>(at::detail::round_up(at::detail::address_of(base) + 32, a));
        const std::size_t offset = static_cast<std::size_t>(p - base);
        tags::prev_size(p - 16) = 0;
        tags::head(p - 16) = offset | redirect | tags::in_use;
        return p;
    }
    void deallocate(void* p) noexcept {
        auto* b = static_cast<std::byte*>(p);
        const std::size_t h = tags::head(b - 16);
        if (h & redirect) return heap_.deallocate(b - (h & ~tags::flags));
        heap_.deallocate(p);
    }
    std::size_t usable_size(const void* p) const noexcept {
        auto* b = static_cast<const std::byte*>(p);
        const std::size_t h = tags::head(b - 16);
        if (h & redirect) {
            const std::size_t offset = h & ~tags::flags;
            return heap_type::usable_size(b - offset) - offset;
        }
        return heap_type::usable_size(p);
    }
    std::size_t os_bytes() const noexcept { return heap_.stats().os_bytes; }

private:
    using heap_type = at::lea_heap<source>;
    heap_type heap_;
};
using backend = lea_backend;
#else
// page_spans: every page holds one chunk size (needed by page_map, harmless for sized).
using options = at::heap_options<at::detail::page_size, 64 * 1024, 64 * 1024, 4 * 1024 * 1024, true>;
#if defined(ALLOTHEQUE_MALLOC_HEAP_VELOX)
using exact_heap = at::velox_heap<source, options>;
constexpr const char* heap_name = "velox";
#else
using exact_heap = at::medius_heap<source, options>;
constexpr const char* heap_name = "medius";
#endif
#if defined(ALLOTHEQUE_MALLOC_LAYER_SIZED)
using layer = at::layers::sized<exact_heap, true>;
#else
using layer = at::layers::page_map<exact_heap, true>;
#endif
class exact_backend {
public:
    static constexpr const char* name = heap_name;
    void* allocate(std::size_t n, std::size_t a) noexcept { return layer_.allocate(n, a); }
    void deallocate(void* p) noexcept { layer_.deallocate(p); }
    std::size_t usable_size(const void* p) const noexcept { return layer_.usable_size(p); }
    std::size_t os_bytes() const noexcept { return layer_.parent().stats().os_bytes; }

private:
    layer layer_;
};
using backend = exact_backend;
#endif

// ---------------------------------------------------------------------------
// The one heap: static storage, constructed on first use, never destroyed.
// ---------------------------------------------------------------------------
alignas(backend) unsigned char storage[sizeof(backend)];
std::atomic<backend*> the_heap{nullptr};
pthread_mutex_t heap_lock = PTHREAD_MUTEX_INITIALIZER;
std::atomic<int> atfork_state{0};   // 0: not registered, 1: registering/registered

void before_fork() noexcept { pthread_mutex_lock(&heap_lock); }
void after_fork_parent() noexcept { pthread_mutex_unlock(&heap_lock); }
void after_fork_child() noexcept {
    // The child has one thread, the one that forked and holds the lock.
    pthread_mutex_unlock(&heap_lock);
}

[[gnu::noinline]] backend* init_heap() noexcept {
    pthread_mutex_lock(&heap_lock);
    backend* h = the_heap.load(std::memory_order_relaxed);
    if (!h) {
        h = ::new (static_cast<void*>(storage)) backend();
        the_heap.store(h, std::memory_order_release);
    }
    pthread_mutex_unlock(&heap_lock);
    int expected = 0;
    if (atfork_state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel))
        pthread_atfork(&before_fork, &after_fork_parent, &after_fork_child);
    return h;
}

inline backend& get_heap() noexcept {
    backend* h = the_heap.load(std::memory_order_acquire);
    return h ? *h : *init_heap();
}

struct guard {
    guard() noexcept { pthread_mutex_lock(&heap_lock); }
    ~guard() { pthread_mutex_unlock(&heap_lock); }
    guard(const guard&) = delete;
    guard& operator=(const guard&) = delete;
};

// n bytes aligned to a (a power of two, >= 16), or nullptr with errno = ENOMEM.
void* allocate(std::size_t n, std::size_t a = min_align) noexcept {
    backend& h = get_heap();
    void* p;
    {
        guard g;
        p = h.allocate(n == 0 ? 1 : n, a);
    }
    if (!p) errno = ENOMEM;
    return p;
}

void deallocate(void* p) noexcept {
    if (!p) return;
    backend& h = get_heap();
    guard g;
    h.deallocate(p);
}

std::size_t usable(const void* p) noexcept {
    if (!p) return 0;
    backend& h = get_heap();
    guard g;   // page_map reads its table, which refills write
    return h.usable_size(p);
}

std::size_t fix_alignment(std::size_t a) noexcept { return a < min_align ? min_align : a; }

// operator new: loop on the new_handler, throw bad_alloc when there is none.
void* new_impl(std::size_t n, std::size_t a) {
    for (;;) {
        if (void* p = allocate(n, a)) return p;
        std::new_handler nh = std::get_new_handler();
        if (!nh) throw std::bad_alloc();
        nh();
    }
}
void* new_nothrow(std::size_t n, std::size_t a) noexcept {
    try {
        return new_impl(n, a);
    } catch (...) {
        return nullptr;
    }
}

} // namespace

// ---------------------------------------------------------------------------
// C entry points.
// ---------------------------------------------------------------------------
extern "C" {

ALLOTHEQUE_EXPORT void* malloc(size_t n) noexcept { return allocate(n); }

ALLOTHEQUE_EXPORT void free(void* p) noexcept { deallocate(p); }

ALLOTHEQUE_EXPORT void cfree(void* p) noexcept { deallocate(p); }

ALLOTHEQUE_EXPORT void* calloc(size_t count, size_t size) noexcept {
    size_t n;
    if (__builtin_mul_overflow(count, size, &n)) {
        errno = ENOMEM;
        return nullptr;
    }
    void* p = allocate(n);
    if (p) memset(p, 0, n);
    return p;
}

ALLOTHEQUE_EXPORT void* realloc(void* p, size_t n) noexcept {
    if (!p) return allocate(n);
    if (n == 0) {   // glibc: free and return NULL
        deallocate(p);
        return nullptr;
    }
    const size_t have = usable(p);
    // In place when it fits and does not waste more than half of the block.
    if (n <= have && (have <= 256 || n >= have / 2)) return p;
    void* q = allocate(n);
    if (!q) return nullptr;   // errno set; p untouched
    memcpy(q, p, n < have ? n : have);
    deallocate(p);
    return q;
}

ALLOTHEQUE_EXPORT void* reallocarray(void* p, size_t count, size_t size) noexcept {
    size_t n;
    if (__builtin_mul_overflow(count, size, &n)) {
        errno = ENOMEM;
        return nullptr;
    }
    return realloc(p, n);
}

ALLOTHEQUE_EXPORT int posix_memalign(void** out, size_t alignment, size_t n) noexcept {
    if (alignment < sizeof(void*) || !allotheque::detail::is_pow2(alignment)) return EINVAL;
    const int saved = errno;
    void* p = allocate(n, fix_alignment(alignment));
    if (!p) {
        errno = saved;   // posix_memalign reports through its result, not errno
        return ENOMEM;
    }
    *out = p;
    return 0;
}

ALLOTHEQUE_EXPORT void* aligned_alloc(size_t alignment, size_t n) noexcept {
    if (!allotheque::detail::is_pow2(alignment)) {
        errno = EINVAL;
        return nullptr;
    }
    return allocate(n, fix_alignment(alignment));
}

ALLOTHEQUE_EXPORT void* memalign(size_t alignment, size_t n) noexcept {
    if (alignment == 0) alignment = 1;
    if (!allotheque::detail::is_pow2(alignment)) {   // glibc rounds up to a power of two
        if (alignment > (SIZE_MAX >> 1)) {
            errno = EINVAL;
            return nullptr;
        }
        alignment = std::size_t{1} << (64 - __builtin_clzll(alignment));
    }
    return allocate(n, fix_alignment(alignment));
}

ALLOTHEQUE_EXPORT void* valloc(size_t n) noexcept { return allocate(n, allotheque::detail::page_size); }

ALLOTHEQUE_EXPORT void* pvalloc(size_t n) noexcept {
    const size_t rounded = allotheque::detail::round_up(n == 0 ? 1 : n, allotheque::detail::page_size);
    if (rounded == 0) {
        errno = ENOMEM;
        return nullptr;
    }
    return allocate(rounded, allotheque::detail::page_size);
}

ALLOTHEQUE_EXPORT size_t malloc_usable_size(void* p) noexcept { return usable(p); }

// Not part of any standard: lets a program (and our tests) check that this
// library, and which heap, really serves its allocations.
ALLOTHEQUE_EXPORT const char* allotheque_malloc_heap_name() noexcept { return backend::name; }
ALLOTHEQUE_EXPORT size_t allotheque_malloc_os_bytes() noexcept {
    backend& h = get_heap();
    guard g;
    return h.os_bytes();
}

} // extern "C"

// ---------------------------------------------------------------------------
// C++ replaceable allocation functions, all forms.
// ---------------------------------------------------------------------------
ALLOTHEQUE_EXPORT void* operator new(std::size_t n) { return new_impl(n, min_align); }
ALLOTHEQUE_EXPORT void* operator new[](std::size_t n) { return new_impl(n, min_align); }
ALLOTHEQUE_EXPORT void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return new_nothrow(n, min_align); }
ALLOTHEQUE_EXPORT void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
    return new_nothrow(n, min_align);
}
ALLOTHEQUE_EXPORT void* operator new(std::size_t n, std::align_val_t a) {
    return new_impl(n, fix_alignment(static_cast<std::size_t>(a)));
}
ALLOTHEQUE_EXPORT void* operator new[](std::size_t n, std::align_val_t a) {
    return new_impl(n, fix_alignment(static_cast<std::size_t>(a)));
}
ALLOTHEQUE_EXPORT void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
    return new_nothrow(n, fix_alignment(static_cast<std::size_t>(a)));
}
ALLOTHEQUE_EXPORT void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
    return new_nothrow(n, fix_alignment(static_cast<std::size_t>(a)));
}

ALLOTHEQUE_EXPORT void operator delete(void* p) noexcept { deallocate(p); }
ALLOTHEQUE_EXPORT void operator delete[](void* p) noexcept { deallocate(p); }
ALLOTHEQUE_EXPORT void operator delete(void* p, const std::nothrow_t&) noexcept { deallocate(p); }
ALLOTHEQUE_EXPORT void operator delete[](void* p, const std::nothrow_t&) noexcept { deallocate(p); }
ALLOTHEQUE_EXPORT void operator delete(void* p, std::size_t) noexcept { deallocate(p); }
ALLOTHEQUE_EXPORT void operator delete[](void* p, std::size_t) noexcept { deallocate(p); }
ALLOTHEQUE_EXPORT void operator delete(void* p, std::align_val_t) noexcept { deallocate(p); }
ALLOTHEQUE_EXPORT void operator delete[](void* p, std::align_val_t) noexcept { deallocate(p); }
ALLOTHEQUE_EXPORT void operator delete(void* p, std::size_t, std::align_val_t) noexcept { deallocate(p); }
ALLOTHEQUE_EXPORT void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { deallocate(p); }
ALLOTHEQUE_EXPORT void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { deallocate(p); }
ALLOTHEQUE_EXPORT void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
    deallocate(p);
}
