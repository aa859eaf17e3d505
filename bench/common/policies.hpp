// The allocation policies the benchmarks compare (see bench/README.md).
//
//   raw::malloc_policy   std::malloc / std::free; ignores hints. The same binary
//                        is run with LD_PRELOAD of jemalloc, mimalloc or
//                        tcmalloc for those baselines (malloc_library() says
//                        which one is really active).
//   raw::pmr_policy      std::pmr::unsynchronized_pool_resource over
//                        new_delete_resource; ignores hints.
//   raw::heap_policy<H>  an allotheque heap; honours hints:
//                        allocate(n, hint) -> heap.allocate(request{n, hint}).
//
// counted<Raw> adds the same accounting to every one of them: live requested
// bytes and their peak (the `peak_requested_bytes` column). The Olden driver
// uses the counted policies; the micro-benchmarks use the raw ones.
#pragma once
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory_resource>
#include <new>
#include <string>

#include <allotheque/allocators/defero.hpp>
#include <allotheque/allocators/kingsley.hpp>
#include <allotheque/allocators/kingsley_coalescing.hpp>
#include <allotheque/allocators/lea.hpp>
#include <allotheque/allocators/medius.hpp>
#include <allotheque/allocators/quickfit.hpp>
#include <allotheque/allocators/segregated.hpp>
#include <allotheque/allocators/velox.hpp>
#include <allotheque/heap.hpp>

#include "policy.hpp"
#include "process_memory.hpp"

namespace bench {

// Which malloc implementation is mapped into this process: "jemalloc",
// "mimalloc", "tcmalloc" when one of those libraries is loaded (LD_PRELOAD),
// otherwise "glibc".
inline std::string malloc_library() { return allotheque::tools::malloc_library(); }

namespace raw {

struct malloc_policy {
    static constexpr bool is_heap = false;
    void* allocate(std::size_t n, const void*) {
        void* p = std::malloc(n);
        if (!p) throw std::bad_alloc();
        return p;
    }
    void deallocate(void* p, std::size_t) noexcept { std::free(p); }
    const char* name() const noexcept { return "malloc"; }
};

struct pmr_policy {
    static constexpr bool is_heap = false;
    std::pmr::unsynchronized_pool_resource pool{std::pmr::new_delete_resource()};
    void* allocate(std::size_t n, const void*) { return pool.allocate(n, alignof(std::max_align_t)); }
    void deallocate(void* p, std::size_t n) noexcept { pool.deallocate(p, n, alignof(std::max_align_t)); }
    const char* name() const noexcept { return "pmr"; }
};

template <class Heap>
struct heap_policy {
    static constexpr bool is_heap = true;
    using heap_type = Heap;
    Heap heap;
    const char* label;
    explicit heap_policy(const char* l = "heap") : label(l) {}
    // Forced inline, so that a benchmark loop sees what a program calling
    // heap.allocate(request{n}) directly gets (the heap's fast path inlined at
    // the call), not a call into this adapter.
    [[gnu::always_inline]] void* allocate(std::size_t n, const void* hint) {
        return heap.allocate(allotheque::request{n, hint});
    }
    [[gnu::always_inline]] void deallocate(void* p, std::size_t n) noexcept {
        heap.deallocate(p, allotheque::request{n});
    }
    const char* name() const noexcept { return label; }
    allotheque::heap_stats stats() const noexcept { return heap.stats(); }
};

using kingsley_policy = heap_policy<allotheque::kingsley_heap<>>;
using quickfit_policy = heap_policy<allotheque::quickfit_heap<>>;
using segregated_policy = heap_policy<allotheque::segregated_heap<>>;
using velox_policy = heap_policy<allotheque::velox_heap<>>;
using medius_policy = heap_policy<allotheque::medius_heap<>>;
using defero_policy = heap_policy<allotheque::defero_heap<>>;
// Boundary-tag heaps (block_heap): splitting and coalescing.
using lea_policy = heap_policy<allotheque::lea_heap<>>;
using lea_deferred_policy = heap_policy<allotheque::lea_deferred_heap<>>;
using kingsley_coalescing_policy = heap_policy<allotheque::kingsley_coalescing_heap<>>;

} // namespace raw

// Counts live requested bytes and their peak, the same way for every policy.
template <class Raw>
struct counted {
    static constexpr bool is_heap = Raw::is_heap;
    Raw inner;
    std::size_t live_bytes = 0;
    std::size_t peak_bytes = 0;

    counted() = default;
    template <class... A>
    explicit counted(A&&... a) : inner(static_cast<A&&>(a)...) {}

    void* allocate(std::size_t n, const void* hint) {
        void* p = inner.allocate(n, hint);
        live_bytes += n;
        if (live_bytes > peak_bytes) peak_bytes = live_bytes;
        return p;
    }
    void deallocate(void* p, std::size_t n) noexcept {
        inner.deallocate(p, n);
        live_bytes -= n;
    }
    const char* name() const noexcept { return inner.name(); }
    // Restart the peak at the current live volume (after ageing the heap).
    void reset_peak() noexcept { peak_bytes = live_bytes; }
};

static_assert(policy<raw::malloc_policy>);
static_assert(policy<raw::pmr_policy>);
static_assert(policy<raw::kingsley_policy>);
static_assert(policy<counted<raw::velox_policy>>);
static_assert(policy<counted<raw::lea_policy>>);

} // namespace bench
