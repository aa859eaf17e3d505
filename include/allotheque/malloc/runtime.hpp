// malloc_runtime<D>: the C malloc family and operator new's semantics over the
// thread heaps of a malloc declaration D (malloc/thread_heaps.hpp). The entry
// points themselves are defined by ALLOTHEQUE_DEFINE_MALLOC (allotheque/malloc.hpp).
//
// Bad input: free/realloc/malloc_usable_size of a pointer no heap handed out
// (stack, globals, another mmap, an interior pointer) and a double free abort
// with a message on stderr; nothing is handed out twice. Blocks of glibc's
// own malloc go back to glibc (malloc/glibc_heap.hpp).
// Errors: every allocation failure sets errno = ENOMEM (EINVAL for a bad
// alignment where POSIX says so). operator new loops on the new_handler and
// throws std::bad_alloc; the nothrow forms return nullptr. calloc skips
// clearing memory fresh from the system (large blocks).
#pragma once
#include <errno.h>
#include <string.h>

#include <cstddef>
#include <cstdint>
#include <new>

#include <allotheque/backend/page_map.hpp>
#include <allotheque/block_heap.hpp>
#include <allotheque/detail/bits.hpp>
#include <allotheque/detail/fail.hpp>
#include <allotheque/detail/text_out.hpp>
#include <allotheque/malloc/cxx_runtime.hpp>
#include <allotheque/malloc/glibc_heap.hpp>
#include <allotheque/malloc/thread_heaps.hpp>
#include <allotheque/malloc_stats.h>

#if defined(__clang__)
#define ALLOTHEQUE_DETAIL_OPAQUE [[gnu::noinline]]
#else
#define ALLOTHEQUE_DETAIL_OPAQUE [[gnu::noipa]]
#endif

namespace allotheque {

template <malloc_declaration D>
class malloc_runtime : public malloc_threads<D> {
    static_assert(detail::check_malloc_heap<typename D::heap>());
    static_assert(!malloc_hints_previous<D> || !detail::forgets_last<typename D::heap>,
                  "allotheque malloc: the previous allocation as each malloc's hint (the default) needs a heap that "
                  "remembers it: heap_config{.remember_last = true}, or declare hint_previous_allocation = false");
    using base = malloc_threads<D>;
    using typename base::marks;
    using typename base::thread_heap;
    using base::block_heap;
    using base::tl_heap;
    using span = backend::span;
    using span_state = backend::span_state;

public:
    using heap_type = typename D::heap;
    static constexpr std::size_t min_align = 16;
    static constexpr const char* name = D::name;

    // n bytes aligned to a (a power of two), or nullptr with errno = ENOMEM.
    // The fast path calls nothing (heap::try_allocate_cached), so it saves no
    // registers; whatever it cannot serve goes to allocate_missed (a locality
    // heap's search), then to allocate_slow, which takes the remote frees
    // back first. The fast path does not read the remote
    // list: its head is the line other threads' frees write, and a heap that
    // still holds a chunk of the size has no need of them yet (mimalloc
    // collects its thread-free lists the same way, on a miss).
    [[gnu::always_inline]] static void* allocate(std::size_t n, std::size_t a, bool zero = false) noexcept {
        if constexpr (!block_heap) {
            if (void* p = allocate_cached(n, a, zero)) [[likely]]
                return p;
            return allocate_missed(n, a, zero);
        } else {
            thread_heap* th = tl_heap;
            if (th == nullptr) [[unlikely]]
                return allocate_slow(n, a, zero);
            if constexpr (heap_type::parks) {
                // A block parked by a free of the size, inline, else one
                // call for the rest, so that the pop keeps no frame (the Lea
                // library's malloc + free 125 -> 112 instructions). Frees
                // waiting to be handed over or taken back come first, as
                // in allocate_in.
                if (base::pending(th)) [[unlikely]]
                    return allocate_slow(n, a, zero);
                if (void* p = th->heap.try_allocate_parked(request_in(th, n, a, zero))) [[likely]]
                    return p;
                return allocate_unparked(th, n, a, zero);
            }
            return allocate_in(th, n, a, zero);
        }
    }
    [[gnu::noinline]] static void* allocate_unparked(thread_heap* th, std::size_t n, std::size_t a, bool zero) noexcept
        requires block_heap
    {
        void* p = th->heap.try_allocate_unparked(request_in(th, n, a, zero));
        if (!p) errno = ENOMEM;
        return p;
    }
    // The fast path alone: a chunk the thread's heap already holds, or nullptr
    // (nothing else tried).
    [[gnu::always_inline]] static void* allocate_cached(std::size_t n, std::size_t a, bool zero = false) noexcept
        requires(!block_heap)
    {
        if (thread_heap* th = tl_heap) [[likely]] {
            request r = request_in(th, n, a, zero);
            if constexpr (requires { th->heap.try_allocate_cached(r); }) return th->heap.try_allocate_cached(r);
        }
        return nullptr;
    }
    // What the fast path missed: the partition's search where it is apart
    // from the pop (heap::searches_apart), before the slow path's remote
    // frees and refills (draining them first made the Velox malloc's server
    // workload 17 % slower at two threads); else the slow path at once.
    [[gnu::always_inline]] static void* allocate_missed(std::size_t n, std::size_t a, bool zero) noexcept
        requires(!block_heap)
    {
        if constexpr (heap_type::searches_apart) return zero ? allocate_searched<true>(n, a) : allocate_searched<false>(n, a);
        else return allocate_slow(n, a, zero);
    }
    // The request waits in the thread's memory while the search runs, and
    // `zero` is a template argument: the search rarely fails (13 times in
    // 8,315 on random sizes), and keeping n, a and zero in registers across
    // it made every search save and restore five registers (random sizes:
    // the Velox library 96.9 -> 95.8 instructions a step, Medius 166.7 ->
    // 163.7). A signal handler that mallocs may overwrite the request only
    // where it interrupted a malloc, which POSIX leaves undefined anyway.
    template <bool Zero>
    [[gnu::noinline]] static void* allocate_searched(std::size_t n, std::size_t a) noexcept
        requires(!block_heap)
    {
        thread_heap* th = tl_heap;
        if (!th) [[unlikely]]
            return allocate_slow(n, a, Zero);
        tl_missed = {n, a};
        if (void* p = th->heap.try_allocate_searched(request_in(th, n, a, Zero))) return p;
        return allocate_slow(tl_missed.n, tl_missed.a, Zero);
    }
    struct missed_request {
        std::size_t n, a;
    };
    static inline constinit thread_local missed_request tl_missed [[gnu::tls_model("initial-exec")]] = {};

    // free: a block of the calling thread's heap goes straight back, any other
    // onto its owner's remote list. Inlined into each entry point (the path is
    // mostly loads and compares), the locality heaps' too since their free
    // shrank to a compare and a push (Velox and Medius: one instruction less
    // a free, once dense_index::find was forced inline).
    [[gnu::always_inline]] static void deallocate(void* p) noexcept { deallocate_body(p); }

    // `what`: the caller's name for the message of a bad pointer.
    static std::size_t usable(void* p, const char* what = "malloc_usable_size") noexcept {
        if (!p) return 0;
        span* sp = block_span(p);
        if (!sp) [[unlikely]]
            return usable_not_ours(what, p);
        check_in_use(p, sp, what);
        return usable_in(p, sp);
    }

    [[gnu::always_inline]] static void* calloc(std::size_t count, std::size_t size) noexcept {
        std::size_t n;
        if (__builtin_mul_overflow(count, size, &n)) {
            errno = ENOMEM;
            return nullptr;
        }
        return allocate(n, min_align, true);
    }

    [[gnu::always_inline]] static void* realloc(void* p, std::size_t n) noexcept {
        if (!p) return allocate(n, min_align);
        if (n == 0) {   // glibc: free and return NULL
            deallocate(p);
            return nullptr;
        }
        span* sp = block_span(p);   // looked up once for both questions
        if (!sp) [[unlikely]]
            return realloc_not_ours(p, n);
        check_in_use(p, sp, "realloc");
        const std::size_t have = usable_in(p, sp);
        // In place when it fits and does not waste more than half of the block.
        if (n <= have && (have <= 256 || n >= have / 2)) return p;
        if (n > have)
            if (void* q = resize_without_copy(p, sp, n)) return q;
        void* q = allocate(n, min_align);
        if (!q) return nullptr;   // errno set; p untouched
        ::memcpy(q, p, n < have ? n : have);
        deallocate(p);
        return q;
    }

    static int posix_memalign(void** out, std::size_t alignment, std::size_t n) noexcept {
        if (alignment < sizeof(void*) || !detail::is_pow2(alignment)) return EINVAL;
        const int saved = errno;
        void* p = allocate(n, fix_alignment(alignment));
        if (!p) {
            errno = saved;   // posix_memalign reports through its result, not errno
            return ENOMEM;
        }
        *out = p;
        return 0;
    }

    static void* aligned_alloc(std::size_t alignment, std::size_t n) noexcept {
        if (!detail::is_pow2(alignment)) return invalid_alignment();
        return allocate(n, fix_alignment(alignment));
    }
    // Out of line: with errno set inline, g++ gave the Velox library's
    // aligned_alloc a frame on every call (58 -> 52 instructions a pair).
    [[gnu::noinline, gnu::cold]] static void* invalid_alignment() noexcept {
        errno = EINVAL;
        return nullptr;
    }

    static void* memalign(std::size_t alignment, std::size_t n) noexcept {
        if (alignment == 0) alignment = 1;
        if (!detail::is_pow2(alignment)) {   // glibc rounds up to a power of two
            if (alignment > (SIZE_MAX >> 1)) return invalid_alignment();
            alignment = std::size_t{1} << (64 - __builtin_clzll(alignment));
        }
        return allocate(n, fix_alignment(alignment));
    }

    static void* pvalloc(std::size_t n) noexcept {
        const std::size_t rounded = detail::round_up(n == 0 ? 1 : n, detail::page_size);
        if (rounded == 0) {
            errno = ENOMEM;
            return nullptr;
        }
        return allocate(rounded, detail::page_size);
    }

    static std::size_t fix_alignment(std::size_t a) noexcept { return a < min_align ? min_align : a; }

    // operator new: malloc's fast path inline (the whole allocation for a
    // block heap, as its malloc has it), the rest out of line. With the
    // new_handler loop in the same function, the hit had a frame of six
    // saved registers: 56 instructions a `new` against malloc's 17.
    [[gnu::always_inline]] static void* new_impl(std::size_t n, std::size_t a) {
        if constexpr (!block_heap) {
            if (void* p = allocate_cached(n, a)) [[likely]]
                return p;
            return new_slow(n, a);
        } else {
            if (void* p = allocate(n, a)) [[likely]]
                return p;
            return new_failed(n, a);
        }
    }
    [[gnu::noinline]] static void* new_slow(std::size_t n, std::size_t a) {
        if (void* p = allocate_missed(n, a, false)) return p;
        return new_failed(n, a);
    }
    // An allocation failed: the new_handler's turn, then another try, until
    // one succeeds; bad_alloc when there is no handler. The runtime's
    // functions are looked up, not linked (malloc/cxx_runtime.hpp).
    [[gnu::noinline, gnu::cold]] static void* new_failed(std::size_t n, std::size_t a) {
        for (;;) {
            std::new_handler nh = detail::cxx_runtime::new_handler();
            if (!nh) detail::cxx_runtime::throw_bad_alloc();
            nh();
            if (void* p = allocate(n, a)) return p;
        }
    }
    // No handler loop here, so malloc's own path serves: no frame to keep
    // small by splitting the fast path off as new_impl does.
    static void* new_nothrow(std::size_t n, std::size_t a) noexcept {
        if (void* p = allocate(n, a)) [[likely]]
            return p;
        return new_nothrow_failed(n, a);
    }
    // With a handler installed, the runtime's nothrow new runs our throwing
    // one and catches. Without such a function after ours (a static link),
    // the handler loop runs here and a handler that throws ends the program.
    [[gnu::noinline, gnu::cold]] static void* new_nothrow_failed(std::size_t n, std::size_t a) noexcept {
        if (!detail::cxx_runtime::new_handler()) return nullptr;
        void* p = nullptr;
        if (detail::cxx_runtime::next_nothrow_new(n, a > min_align ? a : 0, p)) return p;
        while (std::new_handler nh = detail::cxx_runtime::new_handler()) {
            nh();
            if (void* q = allocate(n, a)) return q;
        }
        return nullptr;
    }

    // Bytes every thread heap holds from the system (spans, cached pages, records).
    static std::size_t os_bytes() noexcept {
        std::size_t total = 0;
        base::for_each_heap([&](const thread_heap& h) { total += h.heap.stats().os_bytes; });
        return total;
    }

    // allotheque_malloc_stats (malloc_stats.h): every heap summed.
    static int process_stats(allotheque_stats* out) noexcept {
        if (!out) return -1;
        *out = allotheque_stats{};
        base::for_each_heap([&](const thread_heap& h) { add(*out, h); });
        return 0;
    }
    // allotheque_malloc_heap_stats: a row per heap, at most max; how many exist.
    static std::size_t per_heap_stats(allotheque_stats* out, std::size_t max) noexcept {
        std::size_t n = 0;
        base::for_each_heap([&](const thread_heap& h) {
            if (out && n < max) {
                out[n] = allotheque_stats{};
                add(out[n], h);
            }
            ++n;
        });
        return n;
    }

    // malloc_stats(), and ALLOTHEQUE_SHOW_STATS at exit: a line per heap (the
    // first rows_shown) and the total, on stderr, without allocating.
    static void print_stats() noexcept {
        constexpr std::size_t rows_shown = 32;
        allotheque_stats rows[rows_shown];
        const std::size_t n = per_heap_stats(rows, rows_shown);
        allotheque_stats total;
        process_stats(&total);
        detail::text_out o(2);
        o << "allotheque malloc (" << name << "): " << n << " thread heap(s), in bytes\n";
        for (std::size_t i = 0; i < n && i < rows_shown; ++i) {
            o << "  heap " << i << (rows[i].orphaned_heaps ? " (orphaned)" : "") << ":";
            row(o, rows[i]);
        }
        if (n > rows_shown) o << "  (" << n - rows_shown << " more heaps)\n";
        o << "  total:";
        row(o, total);
        o << "  peak_os " << total.peak_os_bytes << ", metadata " << total.metadata_bytes << ", decommitted "
          << total.decommitted_bytes << ", orphaned heaps " << total.orphaned_heaps
          << ", heaps with remote frees pending " << total.remote_pending_heaps << "\n";
    }

    // malloc_info(0, fp): glibc's XML shape, allotheque's figures. Collected
    // first, written after (fwrite may allocate its buffer).
    static int info(int options, FILE* fp) noexcept {
        if (options != 0 || !fp) {
            errno = EINVAL;
            return -1;
        }
        constexpr std::size_t rows_shown = 64;
        allotheque_stats rows[rows_shown];
        const std::size_t n = per_heap_stats(rows, rows_shown);
        allotheque_stats total;
        process_stats(&total);
        detail::text_out o(fp);
        o << "<malloc version=\"allotheque-1\" heap=\"" << name << "\">\n";
        for (std::size_t i = 0; i < n && i < rows_shown; ++i) xml(o, rows[i], "heap", i);
        xml(o, total, "total", n);
        o << "</malloc>\n";
        return 0;
    }

    // mallinfo2's fields, filled with what they mean here (docs/malloc.md).
    template <class M>
    static M mall_info() noexcept {
        allotheque_stats t;
        process_stats(&t);
        M m{};
        using F = decltype(m.arena);
        m.arena = static_cast<F>(t.os_bytes - t.large_bytes);   // held from the system, large blocks aside
        m.ordblks = static_cast<F>(t.heaps);
        m.hblks = static_cast<F>(t.large_blocks);
        m.hblkhd = static_cast<F>(t.large_bytes);
        m.uordblks = static_cast<F>(t.active_bytes - t.large_bytes);   // in small spans (blocks and their free chunks)
        m.fordblks = static_cast<F>(t.free_bytes);
        m.keepcost = static_cast<F>(t.free_bytes);
        return m;
    }

    // ALLOTHEQUE_SHOW_STATS=1: the statistics when the process exits.
    static void at_exit() noexcept {
        if (base::settings().show_stats) print_stats();
    }
    // How many thread heaps exist (at most the peak number of live threads,
    // plus those abandoned by fork).
    static std::size_t heap_count() noexcept {
        std::size_t n = 0;
        base::for_each_heap([&](const thread_heap&) { ++n; });
        return n;
    }

private:
    static void add(allotheque_stats& s, const thread_heap& h) noexcept {
        const heap_stats st = h.heap.stats();
        s.heaps += 1;
        s.orphaned_heaps += h.orphaned.load(std::memory_order_relaxed) ? 1 : 0;
        s.active_bytes += st.small_span_bytes + st.large_bytes;
        s.large_blocks += st.large_blocks;
        s.large_bytes += st.large_bytes;
        s.os_bytes += st.os_bytes;
        s.peak_os_bytes += st.peak_os_bytes;
        // Free pages that went back by madvise are the only part of os_bytes
        // known not to be resident.
        s.resident_bytes += st.os_bytes - (st.free_bytes - st.resident_free_bytes);
        s.free_bytes += st.free_bytes;
        s.metadata_bytes += st.metadata_bytes;
        s.returned_bytes += st.returned_bytes;
        s.decommitted_bytes += st.decommitted_bytes;
        s.remote_pending_heaps += h.remote.maybe_nonempty() ? 1 : 0;
    }
    static void row(detail::text_out& o, const allotheque_stats& s) noexcept {
        o << " active " << s.active_bytes << ", large " << s.large_blocks << " (" << s.large_bytes << "), os "
          << s.os_bytes << ", resident " << s.resident_bytes << ", free " << s.free_bytes << ", returned "
          << s.returned_bytes << "\n";
    }
    static void xml(detail::text_out& o, const allotheque_stats& s, const char* tag, std::size_t i) noexcept {
        o << "<" << tag << " nr=\"" << i << "\">"
          << "<total type=\"active\" size=\"" << s.active_bytes << "\"/>"
          << "<total type=\"large\" count=\"" << s.large_blocks << "\" size=\"" << s.large_bytes << "\"/>"
          << "<system type=\"current\" size=\"" << s.os_bytes << "\"/>"
          << "<system type=\"max\" size=\"" << s.peak_os_bytes << "\"/>"
          << "<system type=\"resident\" size=\"" << s.resident_bytes << "\"/>"
          << "<total type=\"free\" size=\"" << s.free_bytes << "\"/>"
          << "<total type=\"returned\" size=\"" << s.returned_bytes << "\"/>"
          << "</" << tag << ">\n";
    }

    // What thread heap th is asked for a malloc of n bytes aligned to a: the
    // declaration's size, and the thread's previous allocation as the hint
    // where the heap places by location and the declaration wants it.
    [[gnu::always_inline]] static request request_in(thread_heap* th, std::size_t n, std::size_t a,
                                                     bool zero) noexcept {
        const void* hint = nullptr;
        if constexpr (heap_type::locality_aware && malloc_hints_previous<D>) hint = th->heap.last_allocation();
        request r{malloc_request_size<D>(n), hint, a <= min_align ? 0 : a};
        r.zero = zero;
        return r;
    }

    // A pointer no heap of this library holds: glibc's when glibc_heap
    // recognises it (malloc/glibc_heap.hpp), else the program's mistake.
    [[gnu::noinline, gnu::cold]] static std::size_t usable_not_ours(const char* what, void* p) noexcept {
        glibc_or_invalid(what, p);
        return detail::glibc_heap::usable(p);
    }
    [[gnu::noinline, gnu::cold]] static void* realloc_not_ours(void* p, std::size_t n) noexcept {
        glibc_or_invalid("realloc", p);
        return detail::glibc_heap::realloc(p, n);
    }
    // The one test the three callers share: a pointer glibc's malloc did not
    // hand out, as far as glibc_heap can tell, is the program's mistake and
    // ends it.
    static void glibc_or_invalid(const char* what, const void* p) noexcept {
        if (!detail::glibc_heap::owns(p)) invalid(what, p);
    }
    [[noreturn]] static void invalid(const char* what, const void* p) noexcept {
        detail::fail("allotheque malloc", "double free, or a pointer no heap handed out (interior or foreign)", what,
                     p);
    }

    [[gnu::always_inline]] static void* allocate_in(thread_heap* th, std::size_t n, std::size_t a,
                                                    bool zero) noexcept {
        base::drain_pending(th);
        request r = request_in(th, n, a, zero);
        void* p = th->heap.try_allocate(r);
        if (!p) errno = ENOMEM;
        return p;
    }

    // Everything but a chunk the thread's partition already holds: remote frees
    // to take back, a refill, a large block; a thread's first allocation, or
    // one made after its heap was released at exit (by a later key
    // destructor): that one borrows an orphan, or a new heap that becomes one,
    // for the single call.
    [[gnu::noinline]] static void* allocate_slow(std::size_t n, std::size_t a, bool zero) noexcept {
        if (thread_heap* th = tl_heap) [[likely]]
            return allocate_in(th, n, a, zero);
        // Exited: this thread's heap went back (or it never had one and its
        // exit hand-over ran for another user of the machinery).
        if (detail::thread_binding::exited()) {
            void* p = base::borrow([&](thread_heap& th) noexcept { return allocate_in(&th, n, a, zero); });
            if (!p) errno = ENOMEM;
            return p;
        }
        thread_heap* th = base::attach();
        if (!th) {
            errno = ENOMEM;
            return nullptr;
        }
        return allocate_in(th, n, a, zero);
    }

    // The span of a block start of this library, or null. Inlined: on free's
    // and realloc's paths it is most of the work.
    [[gnu::always_inline]] static span* block_span(void* p) noexcept {
        if constexpr (block_heap)
            return heap_type::block_start_span(static_cast<std::byte*>(p));
        else
            return heap_type::span_of_any(p);
    }
    // A block heap's block handed out must not be freed twice: a free block
    // (or one parked in a fast bin) holds links a remote free would overwrite.
    [[gnu::always_inline]] static void check_in_use([[maybe_unused]] void* p, [[maybe_unused]] span* sp,
                                                    [[maybe_unused]] const char* what) noexcept {
        if constexpr (block_heap)
            if (sp->state != span_state::large && !heap_type::tag_in_use(static_cast<std::byte*>(p)))
                detail::fail("allotheque malloc", "double free", what, p);
    }

    // Every refusal on free's inlined path is a sibling call (a jump) to a
    // function that does not return, rather than a call: then free calls
    // nothing on its fast path and needs no stack frame.
    [[gnu::always_inline]] static void deallocate_body(void* p) noexcept {
        span* sp;
        if constexpr (block_heap) {
            if (!p) return;
            sp = block_span(p);
            if (!sp) [[unlikely]]
                return refuse(p);
            check_in_use(p, sp, "free");
        } else {
            // A chunk of a small span, or anything else (null, a large block,
            // a bad pointer: the page map's empty span or a span that does
            // not hold it as a chunk) off the inlined path: the small path
            // then knows its span's state, and the heap's free does not test
            // it again.
            return release_chunk(p, heap_type::span_at(p));
        }
        release(p, sp);
    }
    [[gnu::noinline, gnu::cold]] static void release_other(void* p) noexcept {
        if (!p) return;
        span* sp = heap_type::span_of_any(p);
        if (!sp) return refuse(p);
        release(p, sp);
    }
    // Not [[noreturn]], and opaque to g++'s interprocedural passes (which
    // would find they never return and keep the calls as calls), so that the
    // callers can jump to them.
    ALLOTHEQUE_DETAIL_OPAQUE [[gnu::cold]] static void refuse(void* p) noexcept {
        glibc_or_invalid("free", p);
        detail::glibc_heap::free(p);
    }
    ALLOTHEQUE_DETAIL_OPAQUE [[gnu::cold]] static void refuse_double(void* p) noexcept {
        detail::fail("allotheque malloc", "double free", "free", p);
    }

    // Marks (detail/free_marks.hpp): "remote" while a block waits on its
    // owner's list (drain clears it), "local" (exact heaps) once it is back in
    // the owner's partition; a block heap's tags say the rest. Caught here
    // rather than in the heap, so the message speaks malloc's words.
    [[gnu::always_inline]] static void release(void* p, span* sp) noexcept {
        auto* owner = static_cast<thread_heap*>(const_cast<void*>(sp->owner));
        std::uint64_t& w = marks::word(p);
        if (block_heap ? w == marks::remote(p) : marks::either(w, p)) [[unlikely]]
            return refuse_double(p);
        if (owner == tl_heap) {
            owner->heap.deallocate(p, *sp);
            return;
        }
        send_remote<false>(p, sp, owner, w);
    }
    // sp: the page map's entry for p, p not tested yet. Whose span it is
    // comes first, so that the holder's test of p reads `handed` with a plain
    // load (span::held_chunk_start); either way the block is not read before
    // p is known to start a chunk.
    [[gnu::always_inline]] static void release_chunk(void* p, span* sp) noexcept
        requires(!block_heap)
    {
        auto* owner = static_cast<thread_heap*>(const_cast<void*>(sp->owner));
        std::uint64_t& w = marks::word(p);
        if (owner == tl_heap) {
            if (!sp->held_chunk_start(p)) [[unlikely]]
                return release_other(p);
            if (marks::either(w, p)) [[unlikely]]
                return refuse_double(p);
            owner->heap.deallocate_chunk(p, *sp);
            return;
        }
        if (!sp->chunk_start(p)) [[unlikely]]
            return release_other(p);
        if (marks::either(w, p)) [[unlikely]]
            return refuse_double(p);
        send_remote<true>(p, sp, owner, w);
    }
    // Chunk: sp is a small span (its state need not be read again).
    template <bool Chunk>
    [[gnu::always_inline]] static void send_remote(void* p, span* sp, thread_heap* owner, std::uint64_t& w) noexcept {
        w = marks::remote(p);
        // The span's size is read here only: hoisted above the owner test
        // (g++ did so for the Velox and Medius heaps), the load cost every
        // local free an instruction. The empty asm says sp may have changed.
        asm("" : "+r"(sp));
        base::hand_over(owner, p, Chunk ? std::size_t{sp->chunk} : usable_in(p, sp));
    }

    [[gnu::always_inline]] static std::size_t usable_in(void* p, [[maybe_unused]] span* sp) noexcept {
        if constexpr (block_heap)
            return heap_type::usable_size(static_cast<const std::byte*>(p), sp);
        else
            return sp->state == span_state::large ? sp->bytes - sp->chunk : sp->chunk;
    }

    // Where this thread owns p (in span sp): p grown in place, or a large
    // block's pages moved to a new address (heap::try_move_large); nullptr
    // when neither can be done.
    static void* resize_without_copy(void* p, span* sp, std::size_t n) noexcept {
        thread_heap* th = tl_heap;
        if (static_cast<const void*>(th) != sp->owner) return nullptr;
        if constexpr (block_heap) {
            if (th->heap.try_resize(p, *sp, n)) return p;
            return th->heap.try_move_large(p, n);
        } else {
            // By the span: a block aligned beyond what classes give is a span
            // of its own at any size, which its size alone does not say.
            if (sp->state != span_state::large) return nullptr;
            if (th->heap.try_grow_large(p, n)) return p;
            return th->heap.try_move_large(p, n);
        }
    }
};

} // namespace allotheque

#undef ALLOTHEQUE_DETAIL_OPAQUE
