// What a heap needs to serve as a process's malloc (malloc/runtime.hpp), and
// the options every shipped malloc uses.
//
// Two kinds qualify, and the malloc finds a block's span and its state
// differently for each:
//   - an exact heap (heap<P, S, O>): chunks of one size per span, the size and
//     owner in the page map; it needs free marks on (heap_config::free_marks),
//     the only way it can tell a double free from a live block without a header;
//   - a block heap (block_heap<P, S, O>): boundary tags before each block,
//     which say whether it is in use.
// Both need 16-byte granularity (malloc's guarantee: max_align_t) and one
// source shared by all threads, arena_source: each thread's heap is built with
// a default-constructed source, and its spans must be in the page map.
#pragma once
#include <concepts>
#include <cstddef>

#include <allotheque/backend/span.hpp>
#include <allotheque/detail/free_marks.hpp>
#include <allotheque/heap_options.hpp>
#include <allotheque/request.hpp>
#include <allotheque/sources/arena_source.hpp>

namespace allotheque {

// 16-byte granularity and free marks: what heap<P, S, malloc_options> needs
// to be a malloc.
inline constexpr heap_config malloc_config{.granularity = 16, .free_marks = true};
using malloc_options = configured<malloc_config>;

namespace detail {
template <class H>
concept malloc_heap_common = std::default_initializable<H> && requires(H& h, const H& ch, const request& r) {
    { h.try_allocate(r) } -> std::same_as<void*>;
    { h.trim() } -> std::convertible_to<std::size_t>;
    { h.release_free_pages() } -> std::convertible_to<std::size_t>;
    { ch.stats() };
    h.set_owner_tag(static_cast<const void*>(nullptr));
    { ch.last_allocation() } -> std::convertible_to<const void*>;
    { H::locality_aware } -> std::convertible_to<bool>;
    { H::granularity } -> std::convertible_to<std::size_t>;
};
} // namespace detail

// heap<P, S, O>: chunk spans found through the page map, free marks.
template <class H>
concept exact_malloc_heap =
    detail::malloc_heap_common<H> && requires(H& h, void* p, backend::span& sp, const request& r, std::size_t n) {
        { H::span_of_any(p) } -> std::same_as<backend::span*>;
        { H::span_at(p) } -> std::same_as<backend::span*>;
        { H::span_of_block(p) } -> std::same_as<backend::span&>;
        typename H::marks;
        h.deallocate(p, sp);
        h.deallocate_chunk(p, sp);
        h.deallocate_queued(p, sp);
        { h.try_grow_large(p, n) } -> std::same_as<bool>;
        { h.try_move_large(p, n) } -> std::same_as<void*>;
    };

// block_heap<P, S, O>: boundary tags.
template <class H>
concept block_malloc_heap = detail::malloc_heap_common<H> && requires(H& h, void* p, backend::span& sp, std::size_t n) {
    { H::usable_size(p) } -> std::same_as<std::size_t>;
    h.deallocate(p);
    h.deallocate(p, sp);
    { H::span_of_block(p) } -> std::same_as<backend::span&>;
    { h.try_resize(p, n) } -> std::same_as<bool>;
    { h.try_resize(p, sp, n) } -> std::same_as<bool>;
    { h.try_move_large(p, n) } -> std::same_as<void*>;
} && !exact_malloc_heap<H>;

template <class H>
concept malloc_heap = (exact_malloc_heap<H> || block_malloc_heap<H>) && H::granularity >= 16 &&
                      std::same_as<typename H::source_type, arena_source>;

namespace detail {
// The readable half of malloc_heap's refusal: each static_assert names one
// missing piece (instantiated by malloc_runtime).
template <class H>
constexpr bool check_malloc_heap() {
    static_assert(malloc_heap_common<H>,
                  "allotheque malloc: the heap needs a default constructor, try_allocate(request), trim(), "
                  "release_free_pages(), "
                  "stats(), set_owner_tag(tag), last_allocation() and locality_aware: an allotheque heap<> or "
                  "block_heap<> has them");
    static_assert(exact_malloc_heap<H> || block_malloc_heap<H>,
                  "allotheque malloc: the heap must be a heap<P, S, O> (span_of_any, span_at, span_of_block, marks, "
                  "deallocate(p, span), deallocate_chunk(p, span), deallocate_queued(p, span), try_grow_large(p, n), "
                  "try_move_large(p, n)) or a block_heap<P, S, O> (usable_size, deallocate(p), deallocate(p, span), "
                  "span_of_block, try_resize(p, n), try_resize(p, span, n), try_move_large(p, n))");
    static_assert(H::granularity >= 16,
                  "allotheque malloc: malloc's blocks are 16-byte aligned: use heap_config{.granularity = 16} "
                  "(allotheque::malloc_options)");
    static_assert(std::same_as<typename H::source_type, arena_source>,
                  "allotheque malloc: every thread heap takes its memory from the shared arena_source");
    if constexpr (exact_malloc_heap<H>)
        static_assert(config_of<typename H::options>().free_marks,
                      "allotheque malloc: an exact heap needs free marks to tell a double free from a live "
                      "block: use heap_config{.free_marks = true} (allotheque::malloc_options)");
    return true;
}

// A locality-aware heap whose last_allocation() stays nullptr (heap_config::remember_last off).
template <class H>
concept forgets_last = H::locality_aware && requires { requires !H::remembers_last; };

template <class H, bool Block = block_malloc_heap<H>>
struct malloc_marks {
    using type = typename H::marks;
};
template <class H>
struct malloc_marks<H, true> {
    using type = free_marks<8>;
};
} // namespace detail

} // namespace allotheque
