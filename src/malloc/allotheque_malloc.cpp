// liballotheque_malloc_<heap>.so: the C malloc family and every C++ operator
// new/delete served by per-thread allotheque heaps, for LD_PRELOAD or linking.
//
// Built from the library's parts, one library per heap (ALLOTHEQUE_MALLOC_HEAP_*):
//   segregated  heap<hash_table<size, spaced_classes<16,128,4>, match_only> ∘ list<void>>
//   velox       velox_heap: the exact size in the previous allocation's 64 KiB vicinity
//   medius      medius_heap: the same on page classes
//   lea         lea_deferred_heap: boundary tags, bins, splitting and coalescing, fast bins
// each over arena_source, with 16-byte granularity and free marks on.
//
// Threads: every thread allocates from its own heap, with no lock. Ownership
// is the span's owner tag in the page map (backend/page_map.hpp), so free(p)
// looks the span up: a block of the calling thread's heap goes straight back;
// any other is pushed onto its owner's remote-free list (one CAS,
// detail/remote_list.hpp), which the owner drains at its next allocation.
// When a thread exits (pthread key destructor), its heap drains, trims and is
// marked orphaned; the next new thread adopts it, and frees that keep arriving
// for it are collected by the threads that push them (see service_orphan), so
// nothing leaks and late cross-thread frees stay valid.
//
// Large blocks are spans of the thread's heap, cached by its back end
// (retain_bytes) and given to the system beyond that; the shared arena_source
// below takes one lock per region, not per block.
//
// Bad input (every variant): free/realloc/malloc_usable_size of a pointer no
// heap handed out (stack, globals, another mmap, an interior pointer) and a
// double free abort with a message on stderr; nothing is handed out twice.
//
// Fork: the registry lock and the arena lock are taken before fork and
// released in both processes; in the child, the heaps of the threads that did
// not survive the fork are never used again (their state may be mid-update).
// Thread state is a plain initial-exec __thread pointer and a pthread key:
// setting up a thread never calls malloc before the thread's heap exists.
// calloc skips clearing memory fresh from the system (large blocks).
// Errors: every allocation failure sets errno = ENOMEM (EINVAL for a bad
// alignment where POSIX says so). operator new loops on the new_handler and
// throws std::bad_alloc; the nothrow forms return nullptr.
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>

#include <allotheque/backend/page_map.hpp>
#include <allotheque/detail/bits.hpp>
#include <allotheque/detail/fail.hpp>
#include <allotheque/detail/free_marks.hpp>
#include <allotheque/detail/remote_list.hpp>
#include <allotheque/heap_options.hpp>
#include <allotheque/request.hpp>
#include <allotheque/sources/arena_source.hpp>

#if defined(ALLOTHEQUE_MALLOC_HEAP_LEA)
#include <allotheque/allocators/lea.hpp>
#elif defined(ALLOTHEQUE_MALLOC_HEAP_VELOX)
#include <allotheque/allocators/segregated.hpp>   // its classes round the requests (below)
#include <allotheque/allocators/velox.hpp>
#elif defined(ALLOTHEQUE_MALLOC_HEAP_MEDIUS)
#include <allotheque/allocators/segregated.hpp>
#include <allotheque/allocators/medius.hpp>
#else
#define ALLOTHEQUE_MALLOC_HEAP_SEGREGATED 1
#include <allotheque/allocators/segregated.hpp>
#endif

#define ALLOTHEQUE_EXPORT __attribute__((visibility("default")))

namespace {

namespace at = allotheque;
using at::backend::span;
using at::backend::span_state;

constexpr std::size_t min_align = 16;
constexpr at::heap_config config{.granularity = 16, .free_marks = true};
using options = at::configured<config>;

#if defined(ALLOTHEQUE_MALLOC_HEAP_LEA)
// Lea's fast bins (blocks up to 256 B freed without coalescing until a
// search needs them): half the instructions of immediate coalescing per small
// malloc + free (bench/instructions: 539 -> 262 per pair), the fragmentation
// of the Olden suite unchanged (README, "Lea deferred").
using heap_type = at::lea_deferred_heap<at::arena_source, options>;
constexpr const char* heap_name = "lea";
#define ALLOTHEQUE_MALLOC_BLOCK_HEAP 1
using marks = at::detail::free_marks<8>;   // word 0 is the remote link
#else
#if defined(ALLOTHEQUE_MALLOC_HEAP_VELOX)
// The same options with Velox's own span_reserve: one-page spans, as
// velox_heap_options (allocators/velox.hpp) says why.
constexpr at::heap_config velox_config = [] {
    at::heap_config c = config;
    c.span_reserve = at::config_of<at::velox_heap_options>().span_reserve;
    return c;
}();
using heap_type = at::velox_heap<at::arena_source, at::configured<velox_config>>;
constexpr const char* heap_name = "velox";
#elif defined(ALLOTHEQUE_MALLOC_HEAP_MEDIUS)
using heap_type = at::medius_heap<at::arena_source, options>;
constexpr const char* heap_name = "medius";
#else
using heap_type = at::segregated_heap<at::arena_source, options>;
constexpr const char* heap_name = "segregated";
#endif
using marks = heap_type::marks;
static_assert(marks::offset >= 8, "the remote link takes word 0");
#endif

// Velox and Medius keep every size exact, so a program asking for thousands of
// distinct sizes (any 16-byte step up to 64 KiB) would carve a new chunk for
// almost every request and never reuse a freed one for a neighbouring size.
// Their malloc asks for the size rounded to the segregated heap's classes
// (at most a quarter of the block lost above 128 B): a few dozen sizes, each
// reused by every request that rounds to it. Blocks of their own are exact.
#if defined(ALLOTHEQUE_MALLOC_HEAP_VELOX) || defined(ALLOTHEQUE_MALLOC_HEAP_MEDIUS)
constexpr std::size_t request_size(std::size_t n) noexcept {
    return n <= options::large_threshold ? at::segregated_partition<>::round_size(n) : n;
}
#else
constexpr std::size_t request_size(std::size_t n) noexcept { return n; }
#endif

// ---------------------------------------------------------------------------
// Thread heaps and their registry.
// ---------------------------------------------------------------------------
struct thread_heap {
    heap_type heap;
    at::detail::remote_list remote;
    std::atomic<bool> orphaned{false};   // no thread uses it: adoptable
    bool abandoned = false;              // a thread that did not survive fork() held it
    thread_heap* next_all = nullptr;
};

constexpr std::size_t thread_heap_bytes = at::detail::round_up(sizeof(thread_heap), at::detail::page_size);

// The registry lock guards the list of heaps and the spare slots, and is never
// held across anything that can allocate or throw: a heap whose tables cannot
// be mapped throws bad_alloc, whose exception is allocated with malloc, which
// would come back here for the lock.
pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
thread_heap* all_heaps = nullptr;   // under registry_lock
std::size_t orphan_count = 0;       // under registry_lock: heaps orphaned by their thread's exit
// Memory of destroyed heaps, kept for the next one: a thread that pushed a
// remote free may still read the heap's `orphaned` flag after its owner was
// drained, emptied and destroyed, so that memory stays mapped (and reads as a
// heap that is not orphaned) for the life of the process.
struct spare_slot {
    spare_slot* next;
};
spare_slot* spare_slots = nullptr;   // under registry_lock

// Where the calling thread is in its life, for the slow paths.
enum class thread_state : unsigned char { fresh, attaching, attached, exited };
__thread thread_heap* tl_heap __attribute__((tls_model("initial-exec"))) = nullptr;
__thread thread_state tl_state __attribute__((tls_model("initial-exec"))) = thread_state::fresh;
pthread_key_t exit_key;
std::atomic<int> started{0};   // 0: nothing, 1: key made, 2: fork handlers registered

// Empty orphans beyond this many are destroyed when their thread exits (a
// burst of threads leaves no trail of heaps); malloc_trim destroys them all.
constexpr std::size_t kept_orphans = 8;

// The owner takes back what other threads freed (clearing the remote mark).
void drain(thread_heap* th) noexcept {
    th->remote.drain([th](at::detail::remote_list::record* r) noexcept {
        marks::word(r) = 0;
#if defined(ALLOTHEQUE_MALLOC_BLOCK_HEAP)
        th->heap.deallocate(r);
#else
        th->heap.deallocate(r, *heap_type::span_of_any(r));
#endif
    });
}

// Whether a heap held by the caller holds no memory a block could be in:
// then no thread can find it through the page map any more.
bool holds_nothing(thread_heap* th) noexcept {
    const at::heap_stats st = th->heap.stats();
    return st.small_span_bytes == 0 && st.large_blocks == 0 && !th->remote.maybe_nonempty();
}

void before_fork() noexcept {
    pthread_mutex_lock(&registry_lock);
    at::arena_source::prefork();
}
void after_fork_parent() noexcept {
    at::arena_source::postfork();
    pthread_mutex_unlock(&registry_lock);
}
void after_fork_child() noexcept {
    at::arena_source::postfork();
    pthread_mutex_init(&registry_lock, nullptr);
    // Only the forking thread exists now: heaps other threads were using may
    // be mid-update and are never touched again (their blocks leak in the child).
    for (thread_heap* h = all_heaps; h; h = h->next_all)
        if (h != tl_heap && !h->orphaned.load(std::memory_order_relaxed)) h->abandoned = true;
}

// A new heap, outside the registry lock (its constructor maps tables and may
// throw); linked in by the caller.
thread_heap* make_heap() noexcept {
    void* m = nullptr;
    pthread_mutex_lock(&registry_lock);
    if (spare_slots) {
        m = spare_slots;
        spare_slots = spare_slots->next;
    }
    pthread_mutex_unlock(&registry_lock);
    if (!m) {
        m = ::mmap(nullptr, thread_heap_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) return nullptr;
    }
    thread_heap* th = nullptr;
    try {
        th = ::new (m) thread_heap();
    } catch (...) {   // the heap's tables could not be mapped
        pthread_mutex_lock(&registry_lock);
        auto* slot = static_cast<spare_slot*>(m);
        slot->next = spare_slots;
        spare_slots = slot;
        pthread_mutex_unlock(&registry_lock);
        return nullptr;
    }
    th->heap.set_owner_tag(th);
    return th;
}

// Under registry_lock, with th held by the caller (not orphaned) and holding
// nothing: unlinks and destroys it, keeping its memory for the next heap.
void destroy_locked(thread_heap* th) noexcept {
    for (thread_heap** link = &all_heaps; *link; link = &(*link)->next_all)
        if (*link == th) {
            *link = th->next_all;
            break;
        }
    th->~thread_heap();
    // What a late reader of `orphaned` sees: all zero, not adoptable.
    std::memset(static_cast<void*>(th), 0, sizeof(thread_heap));
    auto* slot = reinterpret_cast<spare_slot*>(th);
    slot->next = spare_slots;
    spare_slots = slot;
}

// An orphan taken over by the caller, or a new heap linked in; nullptr when
// no memory is left for one.
thread_heap* take_heap() noexcept {
    pthread_mutex_lock(&registry_lock);
    for (thread_heap* h = all_heaps; h; h = h->next_all) {
        bool expected = true;
        if (!h->abandoned && h->orphaned.compare_exchange_strong(expected, false, std::memory_order_acq_rel)) {
            --orphan_count;
            pthread_mutex_unlock(&registry_lock);
            return h;
        }
    }
    pthread_mutex_unlock(&registry_lock);
    thread_heap* th = make_heap();
    if (!th) return nullptr;
    pthread_mutex_lock(&registry_lock);
    th->next_all = all_heaps;
    all_heaps = th;
    pthread_mutex_unlock(&registry_lock);
    return th;
}

// Gives a heap the caller holds to the pool of orphans, or destroys it when
// it holds nothing and enough orphans wait already (`keep` of them).
void release_heap(thread_heap* th, std::size_t keep) noexcept {
    pthread_mutex_lock(&registry_lock);
    if (orphan_count >= keep && holds_nothing(th)) {
        destroy_locked(th);
    } else {
        ++orphan_count;
        th->orphaned.store(true, std::memory_order_release);
    }
    pthread_mutex_unlock(&registry_lock);
}

// A thread's heap goes to the pool of orphans when its thread exits. Key
// destructors that run after this one may still allocate: they borrow a heap
// for each call (tl_state = exited), so none is left tied to a dead thread.
void on_thread_exit(void* v) noexcept {
    auto* th = static_cast<thread_heap*>(v);
    if (tl_heap == th) tl_heap = nullptr;
    tl_state = thread_state::exited;
    drain(th);
    th->heap.trim();
    release_heap(th, kept_orphans);
}

void ensure_started() noexcept {
    if (started.load(std::memory_order_acquire) != 0) return;
    pthread_mutex_lock(&registry_lock);
    if (started.load(std::memory_order_relaxed) == 0) {
        at::arena_source::fork_handled_externally();
        if (pthread_key_create(&exit_key, on_thread_exit) == 0) started.store(1, std::memory_order_release);
    }
    pthread_mutex_unlock(&registry_lock);
}

// The calling thread's heap, made or adopted; nullptr when there is no memory
// for one, or when called again from inside (an exception thrown while the
// heap is built allocates): that inner call gets NULL, never a wait on a lock.
[[gnu::noinline, gnu::cold]] thread_heap* attach() noexcept {
    if (tl_state == thread_state::attaching) return nullptr;
    const thread_state was = tl_state;
    tl_state = thread_state::attaching;
    ensure_started();
    thread_heap* th = started.load(std::memory_order_acquire) != 0 ? take_heap() : nullptr;
    if (!th) {
        tl_state = was;
        return nullptr;
    }
    tl_heap = th;
    drain(th);
    pthread_setspecific(exit_key, th);   // may allocate (keys past the first 32): tl_heap is set
    int expected = 1;
    if (started.compare_exchange_strong(expected, 2, std::memory_order_acq_rel))
        pthread_atfork(&before_fork, &after_fork_parent, &after_fork_child);   // may allocate too
    tl_state = thread_state::attached;
    return th;
}

// Frees keep arriving for a heap whose thread exited and that no new thread
// adopted yet: the threads that push them take the heap for a moment, now and
// then, and give the blocks back to it.
__thread unsigned orphan_pushes __attribute__((tls_model("initial-exec"))) = 0;
void service_orphan(thread_heap* owner) noexcept {
    if (++orphan_pushes % 64 != 0) return;
    bool expected = true;
    if (owner->abandoned || !owner->orphaned.compare_exchange_strong(expected, false, std::memory_order_acq_rel))
        return;
    drain(owner);
    owner->orphaned.store(true, std::memory_order_release);
}

// ---------------------------------------------------------------------------
// The operations.
// ---------------------------------------------------------------------------
[[noreturn]] void invalid(const char* what, const void* p) noexcept {
    at::detail::fail("allotheque malloc", "double free, or a pointer no heap handed out (interior or foreign)", what, p);
}

[[gnu::always_inline]] inline void* allocate_in(thread_heap* th, std::size_t n, std::size_t a, bool zero) noexcept {
    if (th->remote.maybe_nonempty()) drain(th);
    const void* hint = nullptr;
    if constexpr (heap_type::locality_aware) hint = th->heap.last_allocation();
    at::request r{request_size(n), hint, a <= min_align ? 0 : a};
    r.zero = zero;
    void* p = th->heap.try_allocate(r);
    if (!p) errno = ENOMEM;
    return p;
}

constexpr bool block_heap =
#if defined(ALLOTHEQUE_MALLOC_BLOCK_HEAP)
    true;
#else
    false;
#endif

// The exact heaps' allocation fast path (heap::try_allocate_cached); Lea has none.
template <class H>
[[gnu::always_inline]] inline void* cached(H& h, const at::request& r) noexcept {
    if constexpr (requires { h.try_allocate_cached(r); })
        return h.try_allocate_cached(r);
    else
        return nullptr;
}

// Everything but a chunk the thread's partition already holds: remote frees
// to take back, a refill, a large block; a thread's first allocation, or one
// made after its heap was released at exit (by a later key destructor): that
// one borrows an orphan, or a new heap that becomes one, for the single call.
[[gnu::noinline]] void* allocate_slow(std::size_t n, std::size_t a, bool zero) noexcept {
    if (thread_heap* th = tl_heap) [[likely]]
        return allocate_in(th, n, a, zero);
    if (tl_state == thread_state::exited) {
        ensure_started();
        thread_heap* th = take_heap();
        if (!th) {
            errno = ENOMEM;
            return nullptr;
        }
        void* p = allocate_in(th, n, a, zero);
        release_heap(th, kept_orphans);
        return p;
    }
    thread_heap* th = attach();
    if (!th) {
        errno = ENOMEM;
        return nullptr;
    }
    return allocate_in(th, n, a, zero);
}

// n bytes aligned to a (a power of two), or nullptr with errno = ENOMEM.
// The fast path calls nothing (try_allocate_cached), so it saves no
// registers; whatever it cannot serve goes to allocate_slow.
[[gnu::always_inline]] inline void* allocate(std::size_t n, std::size_t a, bool zero = false) noexcept {
    thread_heap* th = tl_heap;
    if constexpr (!block_heap) {
        if (th && !th->remote.maybe_nonempty()) [[likely]] {
            const void* hint = nullptr;
            if constexpr (heap_type::locality_aware) hint = th->heap.last_allocation();
            at::request r{request_size(n), hint, a <= min_align ? 0 : a};
            r.zero = zero;
            if (void* p = cached(th->heap, r)) [[likely]]
                return p;
        }
        return allocate_slow(n, a, zero);
    } else {
        if (th == nullptr) [[unlikely]]
            return allocate_slow(n, a, zero);
        return allocate_in(th, n, a, zero);
    }
}

// The span of a block start of this library, or abort.
inline span* block_span(void* p, const char* what) noexcept {
#if defined(ALLOTHEQUE_MALLOC_BLOCK_HEAP)
    // A block's tags sit in the 16 bytes before it, in its span.
    using tags = at::boundary_tags;
    auto* q = static_cast<std::byte*>(p);
    span* sp = at::backend::page_map::instance().find(q - tags::payload_offset);
    if (!sp || (sp->state != span_state::block && sp->state != span_state::large) ||
        at::detail::address_of(p) % min_align != 0)
        invalid(what, p);
    if (sp->state == span_state::large) {
        if (q != sp->base + sp->chunk) invalid(what, p);
    } else {
        // A block Lea holds as free (or parked in a fast bin) must not be
        // touched again: a remote free would overwrite its links.
        const std::size_t h = tags::head(tags::block_of(p));
        if (!(h & tags::in_use) || (h & tags::waiting)) at::detail::fail("allotheque malloc", "double free", what, p);
    }
#else
    span* sp = heap_type::span_of_any(p);
    if (!sp) invalid(what, p);
#endif
    return sp;
}
// free, operator delete and realloc each get the whole free path inlined
// (a call saves nothing: the path is mostly loads and compares), except for
// Velox and Medius, whose partitions' free is large enough that the copies
// measured worse (callgrind: Medius batch 325 -> 339 instructions, remote
// 408 -> 438; segregated pair 106 -> 97, Lea 262 -> 257).
#if defined(ALLOTHEQUE_MALLOC_HEAP_VELOX) || defined(ALLOTHEQUE_MALLOC_HEAP_MEDIUS)
#define ALLOTHEQUE_FREE_INLINE inline
#else
#define ALLOTHEQUE_FREE_INLINE [[gnu::always_inline]] inline
#endif
ALLOTHEQUE_FREE_INLINE void deallocate(void* p) noexcept {
    if (!p) return;
    span* sp = block_span(p, "free");
    auto* owner = static_cast<thread_heap*>(const_cast<void*>(sp->owner));
    // Marks (detail/free_marks.hpp): "remote" while a block waits on its
    // owner's list (drain clears it), "local" (exact heaps) once it is back in
    // the owner's partition; Lea's tags say the rest.
    std::uint64_t& w = marks::word(p);
    if (w == marks::remote(p)) at::detail::fail("allotheque malloc", "double free", "free", p);
    // Caught here rather than in the heap, so the message speaks malloc's words.
    if (!block_heap && w == marks::local(p)) at::detail::fail("allotheque malloc", "double free", "free", p);
    if (owner == tl_heap) {
#if defined(ALLOTHEQUE_MALLOC_BLOCK_HEAP)
        owner->heap.deallocate(p);
#else
        owner->heap.deallocate(p, *sp);
#endif
        return;
    }
    w = marks::remote(p);
    owner->remote.push_link(p);
    if (owner->orphaned.load(std::memory_order_relaxed)) service_orphan(owner);
}

// `what`: the caller's name for the message of a bad pointer.
inline std::size_t usable(void* p, const char* what = "malloc_usable_size") noexcept {
    if (!p) return 0;
    [[maybe_unused]] span* sp = block_span(p, what);
#if defined(ALLOTHEQUE_MALLOC_BLOCK_HEAP)
    return heap_type::usable_size(p);
#else
    return sp->state == span_state::large ? sp->bytes - sp->chunk : sp->chunk;
#endif
}

// In place when this thread owns p and its heap can make it fit.
inline bool resize_in_place(void* p, std::size_t n) noexcept {
    span* sp = block_span(p, "realloc");
    thread_heap* th = tl_heap;
    if (static_cast<const void*>(th) != sp->owner) return false;
#if defined(ALLOTHEQUE_MALLOC_BLOCK_HEAP)
    return th->heap.try_resize(p, n);
#else
    if (sp->state != span_state::large) return false;
    return th->heap.try_resize(p, at::request{sp->request, nullptr, 0}, n);
#endif
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

ALLOTHEQUE_EXPORT void* malloc(size_t n) noexcept { return allocate(n, min_align); }

ALLOTHEQUE_EXPORT void free(void* p) noexcept { deallocate(p); }

ALLOTHEQUE_EXPORT void cfree(void* p) noexcept { deallocate(p); }

ALLOTHEQUE_EXPORT void* calloc(size_t count, size_t size) noexcept {
    size_t n;
    if (__builtin_mul_overflow(count, size, &n)) {
        errno = ENOMEM;
        return nullptr;
    }
    return allocate(n, min_align, true);
}

ALLOTHEQUE_EXPORT void* realloc(void* p, size_t n) noexcept {
    if (!p) return allocate(n, min_align);
    if (n == 0) {   // glibc: free and return NULL
        deallocate(p);
        return nullptr;
    }
    const size_t have = usable(p, "realloc");
    // In place when it fits and does not waste more than half of the block.
    if (n <= have && (have <= 256 || n >= have / 2)) return p;
    if (n > have && resize_in_place(p, n)) return p;
    void* q = allocate(n, min_align);
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

// glibc's malloc_trim: the caller's heap and every orphaned one give their
// free pages back, and orphans left holding nothing are destroyed. Returns 1
// when anything went back.
ALLOTHEQUE_EXPORT int malloc_trim(size_t) noexcept {
    std::size_t back = 0;
    if (thread_heap* th = tl_heap) {
        drain(th);
        back += th->heap.trim();
    }
    pthread_mutex_lock(&registry_lock);
    for (thread_heap* h = all_heaps; h;) {
        thread_heap* next = h->next_all;
        bool expected = true;
        if (!h->abandoned && h->orphaned.compare_exchange_strong(expected, false, std::memory_order_acq_rel)) {
            drain(h);
            back += h->heap.trim();
            if (holds_nothing(h)) {
                --orphan_count;
                destroy_locked(h);
                ++back;
            } else {
                h->orphaned.store(true, std::memory_order_release);
            }
        }
        h = next;
    }
    pthread_mutex_unlock(&registry_lock);
    return back > 0;
}

// Not part of any standard: lets a program (and our tests) check that this
// library, and which heap, really serves its allocations.
ALLOTHEQUE_EXPORT const char* allotheque_malloc_heap_name() noexcept { return heap_name; }
// Bytes every thread heap holds from the system (spans, cached pages, records).
ALLOTHEQUE_EXPORT size_t allotheque_malloc_os_bytes() noexcept {
    std::size_t total = 0;
    pthread_mutex_lock(&registry_lock);
    for (thread_heap* h = all_heaps; h; h = h->next_all) total += h->heap.stats().os_bytes;
    pthread_mutex_unlock(&registry_lock);
    return total;
}
// How many thread heaps exist (at most the peak number of live threads, plus
// those abandoned by fork).
ALLOTHEQUE_EXPORT size_t allotheque_malloc_heap_count() noexcept {
    std::size_t n = 0;
    pthread_mutex_lock(&registry_lock);
    for (thread_heap* h = all_heaps; h; h = h->next_all) ++n;
    pthread_mutex_unlock(&registry_lock);
    return n;
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
