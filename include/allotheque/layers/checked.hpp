// `checked<H>`: a debugging layer (Heap Layers' debug folder, foonathan's spy
// allocator). It detects, and aborts with a message on stderr:
//   - a double free                      "allotheque::checked: double free of 0x.. (size N) at file:line"
//   - a pointer this heap never gave out  "allotheque::checked: invalid free of 0x.. ..."
//   - a size (or alignment) at deallocation differing from the allocation
//                                         "allotheque::checked: size mismatch freeing 0x.. ..."
//   - a write past the block's end: kCanary canary bytes follow every block and are
//     checked at free and by verify_all()  "allotheque::checked: overrun past the end of 0x.. ..."
//   - a parent handing out a block that is still live.
// file:line is the caller's: allocate/deallocate/verify_all take a
// std::source_location defaulted to the call site (the macros ALLOTHEQUE_CHECKED_*
// spell it out). Through allocator<T, checked<H>> or another adapter that line
// is the adapter's, so every report also prints the call stacks of the
// failing call and of the block's allocation and free: symbolised with
// file:line under ASan, otherwise as glibc's backtrace_symbols_fd gives them
// (function names need -rdynamic, CMake's ENABLE_EXPORTS; `addr2line -f -C -e
// <binary> <+offset>` resolves the rest).
//
// Leaks: a checked heap destroyed with blocks still live reports them on
// stderr (count, bytes, the first few with their allocation stacks) and does
// not abort; report_leaks(false) turns that off.
//
// Fresh blocks are filled with 0xCD (unless the request asks for zeros,
// request::zero), freed ones with 0xDD (use-after-free reads
// show up as 0xDDDD...). The registry of live and freed blocks is a plain
// std::unordered_map on std::allocator, not memory from the checked heap.
// good_size(n, a) is n itself (when the parent can serve n + kCanary): the
// usable size is exactly what was asked, so any write past it is an overrun.
//
// Thread safety: none (the registry is unsynchronised). Use locked<checked<H>>
// for a shared heap, or per_thread<checked<H>>.
// Cost: a hash-map insert and erase per block, kCanary bytes per block, the fill
// of every block at allocation and free: for debugging, not production.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <version>
#if defined(__cpp_lib_source_location)
#include <source_location>
#endif
#include <unordered_map>
#include <utility>
#if __has_include(<execinfo.h>)
#include <execinfo.h>
#define ALLOTHEQUE_CHECKED_BACKTRACE 1
#endif
#if defined(__SANITIZE_ADDRESS__)
#define ALLOTHEQUE_CHECKED_SYMBOLIZE 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ALLOTHEQUE_CHECKED_SYMBOLIZE 1
#endif
#endif
#if defined(ALLOTHEQUE_CHECKED_SYMBOLIZE)
#include <sanitizer/common_interface_defs.h>
#endif

#include <allotheque/detail/bad_alloc.hpp>
#include <allotheque/layers/heap_concept.hpp>
#include <allotheque/layers/layer.hpp>
#include <allotheque/request.hpp>

// Explicit call-site forms (same effect as the default source_location argument).
#define ALLOTHEQUE_CHECKED_ALLOCATE(h, r) (h).allocate((r), allotheque::layers::source_location::current())
#define ALLOTHEQUE_CHECKED_DEALLOCATE(h, p, r) (h).deallocate((p), (r), allotheque::layers::source_location::current())
#define ALLOTHEQUE_CHECKED_VERIFY_ALL(h) (h).verify_all(allotheque::layers::source_location::current())

namespace allotheque::layers {

#if defined(__cpp_lib_source_location)
using source_location = std::source_location;
#else
// clang before 16 with libstdc++ has no std::source_location: the same builtins
// give the caller's file and line as default arguments.
struct source_location {
    static constexpr source_location current(const char* f = __builtin_FILE(), unsigned l = __builtin_LINE()) noexcept {
        source_location s;
        s.file_ = f;
        s.line_ = l;
        return s;
    }
    constexpr const char* file_name() const noexcept { return file_; }
    constexpr unsigned line() const noexcept { return line_; }
    const char* file_ = "?";
    unsigned line_ = 0;
};
#endif

template <class H>
class checked : public layer<checked<H>, H> {
    using base = layer<checked<H>, H>;
    using base::parent_;

    // A call site: the source_location given, and the return addresses of
    // the call, which name the real caller when the location is an adapter's.
    struct site {
        static constexpr int depth = 12;
        const char* file = "?";
        unsigned line = 0;
        int frames = 0;
        void* pc[depth] = {};
        static site of(const source_location& l) noexcept {
            site s{l.file_name(), l.line()};
#if defined(ALLOTHEQUE_CHECKED_BACKTRACE)
            s.frames = ::backtrace(s.pc, depth);
#endif
            return s;
        }
        // The frames past allotheque's own (and the unwinder's), at most 8.
        void print(const char* what) const noexcept {
            if (frames == 0) return;
            std::fprintf(stderr, "  %s:\n", what);
#if defined(ALLOTHEQUE_CHECKED_SYMBOLIZE) || defined(ALLOTHEQUE_CHECKED_BACKTRACE)
            auto ours = [](const char* f) noexcept {
                return std::strstr(f, "allotheque::") || std::strstr(f, "_ZN10allotheque") ||
                       std::strstr(f, "backtrace") || std::strstr(f, "__sanitizer");
            };
            int shown = 0;
#if defined(ALLOTHEQUE_CHECKED_SYMBOLIZE)
            for (int i = 0; i < frames && shown < 8; ++i) {
                char buf[1024];
                // pc - 1: the call instruction, not the one after it.
                __sanitizer_symbolize_pc(static_cast<char*>(pc[i]) - 1, "%F %L", buf, sizeof buf);
                if (!ours(buf)) std::fprintf(stderr, "    #%d %s\n", shown++, buf);
            }
#else
            char** names = ::backtrace_symbols(pc, frames);   // debugging path: malloc is fine here
            for (int i = 0; names && i < frames && shown < 8; ++i)
                if (!ours(names[i])) std::fprintf(stderr, "    #%d %s\n", shown++, names[i]);
            std::free(names);
#endif
#endif
        }
    };
    struct block {
        std::size_t size, alignment;
        site allocated, freed;
    };

public:
    static constexpr std::size_t kCanary = 16;
    static constexpr unsigned char canary_byte = 0xA5, fresh_byte = 0xCD, freed_byte = 0xDD;

    static constexpr std::size_t granularity = 1;   // good_size is exact
    using base::base;
    checked(const checked&) = delete;
    checked& operator=(const checked&) = delete;
    ~checked() {
        if (report_leaks_ && !live_.empty()) print_leaks();
    }
    // Whether destroying the heap with blocks still live reports them (on by default).
    void report_leaks(bool on) noexcept { report_leaks_ = on; }

    std::size_t good_size(std::size_t n, std::size_t a = 0) const noexcept {
        if (n > std::numeric_limits<std::size_t>::max() - kCanary) return 0;
        return parent_.good_size(n + kCanary, a) != 0 ? n : 0;
    }

    template <request_like R = request>
    [[nodiscard]] void* allocate(const R& r, source_location loc = allotheque::layers::source_location::current()) {
        void* p = try_allocate(r, loc);
        if (!p) [[unlikely]]
            allotheque::detail::throw_bad_alloc();
        return p;
    }
    template <request_like R = request>
    [[nodiscard]] void* try_allocate(const R& r,
                                     source_location loc = allotheque::layers::source_location::current()) noexcept {
        if (r.size > std::numeric_limits<std::size_t>::max() - kCanary) return nullptr;
        R q = r;
        q.size = r.size + kCanary;
        auto* p = static_cast<unsigned char*>(parent_.try_allocate(q));
        if (!p) return nullptr;
        if (live_.contains(p))
            fail(loc, "the parent heap returned %p (size %zu), which is still live (allocated at %s:%u)",
                 static_cast<void*>(p), r.size,
                 live_.at(p).allocated.file, live_.at(p).allocated.line);
        try {
            live_.insert_or_assign(p, block{r.size, r.alignment, site::of(loc), {}});
        } catch (...) {
            parent_.deallocate(p, q);
            return nullptr;
        }
        freed_.erase(p);
        // A request for zeroed memory keeps the zeros its parent gave it.
        bool zero = false;
        if constexpr (requires { r.zero; }) zero = r.zero;
        if (!zero) std::memset(p, fresh_byte, r.size);
        std::memset(p + r.size, canary_byte, kCanary);
        return p;
    }

    void deallocate(void* vp, const request& r, source_location loc = allotheque::layers::source_location::current()) noexcept {
        if (!vp) return;
        auto* p = static_cast<unsigned char*>(vp);
        auto it = live_.find(p);
        if (it == live_.end()) {
            if (auto f = freed_.find(p); f != freed_.end())
                fail(&f->second, loc, "double free of %p (size %zu) at %s:%u; allocated at %s:%u, first freed at %s:%u", vp, r.size,
                     loc.file_name(), loc.line(), f->second.allocated.file, f->second.allocated.line,
                     f->second.freed.file, f->second.freed.line);
            fail(loc, "invalid free of %p (size %zu) at %s:%u: this heap never gave out that pointer", vp, r.size,
                 loc.file_name(), loc.line());
        }
        block& b = it->second;
        if (b.size != r.size || b.alignment != r.alignment)
            fail(&b, loc,
                 "size mismatch freeing %p at %s:%u: allocated with size %zu (alignment %zu) at %s:%u, freed with "
                 "size %zu (alignment %zu)",
                 vp, loc.file_name(), loc.line(), b.size, b.alignment, b.allocated.file, b.allocated.line, r.size,
                 r.alignment);
        check_canary(p, b, loc, "at free");
        b.freed = site::of(loc);
        try {
            freed_.insert_or_assign(p, b);
        } catch (...) {   // out of memory for the registry: lose only the double-free detail
        }
        live_.erase(it);
        std::memset(p, freed_byte, r.size + kCanary);
        request q = r;
        q.size = r.size + kCanary;
        parent_.deallocate(p, q);
    }

    void deallocate_run(void* const* ps, std::size_t n, const request& r,
                        source_location loc = allotheque::layers::source_location::current()) noexcept {
        for (std::size_t i = 0; i < n; ++i) deallocate(ps[i], r, loc);
    }

    // Checks the canary of every live block; aborts on the first overrun found.
    // Returns how many blocks were checked.
    std::size_t verify_all(source_location loc = allotheque::layers::source_location::current()) const noexcept {
        for (const auto& [p, b] : live_) check_canary(static_cast<const unsigned char*>(p), b, loc, "by verify_all");
        return live_.size();
    }

    void deallocate_all() noexcept
        requires has_deallocate_all<H>
    {
        live_.clear();
        freed_.clear();
        parent_.deallocate_all();
    }
    // Exactly what was asked (the canary follows): 0 for a pointer that is not live.
    std::size_t usable_size(const void* p) const noexcept {
        auto it = live_.find(p);
        return it == live_.end() ? 0 : it->second.size;
    }
    // Exact: whether p is a live block of this heap.
    bool owns(const void* p) const noexcept { return live_.contains(p); }
    std::size_t live_blocks() const noexcept { return live_.size(); }

private:
    void check_canary(const unsigned char* p, const block& b, const source_location& loc,
                      const char* when) const noexcept {
        for (std::size_t i = 0; i < kCanary; ++i)
            if (p[b.size + i] != canary_byte)
                fail(&b, loc,
                     "overrun past the end of %p (size %zu, allocated at %s:%u): byte %zu past the end was changed, "
                     "detected %s at %s:%u",
                     static_cast<const void*>(p), b.size, b.allocated.file, b.allocated.line, i, when,
                     loc.file_name(), loc.line());
    }

    void print_leaks() const noexcept {
        std::size_t bytes = 0;
        for (const auto& [p, b] : live_) bytes += b.size;
        std::fprintf(stderr, "allotheque::checked: %zu blocks (%zu bytes) still live when the heap is destroyed\n",
                     live_.size(), bytes);
        int shown = 0;
        for (const auto& [p, b] : live_) {
            if (++shown > 8) break;
            std::fprintf(stderr, "  leak: %p (size %zu) allocated at %s:%u\n", p, b.size, b.allocated.file,
                         b.allocated.line);
            b.allocated.print("allocated from");
        }
        std::fflush(stderr);
    }

    // The stacks that name the caller past any adapter: of this call, and of
    // the block's allocation and earlier free when it has them.
    template <class... A>
    [[noreturn]] static void fail(const block* b, const source_location& loc, const char* fmt, A... args) noexcept {
        print_message(fmt, args...);
        site::of(loc).print("this call");
        if (b) {
            b->allocated.print("the block was allocated from");
            b->freed.print("and first freed from");
        }
        std::fflush(stderr);
        std::abort();
    }
    template <class... A>
    [[noreturn]] static void fail(const source_location& loc, const char* fmt, A... args) noexcept {
        fail(nullptr, loc, fmt, args...);
    }
    template <class... A>
    static void print_message(const char* fmt, A... args) noexcept {
        std::fputs("allotheque::checked: ", stderr);
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
#pragma GCC diagnostic ignored "-Wformat-security"
#endif
        std::fprintf(stderr, fmt, args...);
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
        std::fputc('\n', stderr);
    }

    bool report_leaks_ = true;
    std::unordered_map<const void*, block> live_;
    std::unordered_map<const void*, block> freed_;   // freed and not handed out again
};

} // namespace allotheque::layers
