// The back-end stage concept `span_provider`: what the span registry (and so
// every heap) needs from the stage below it, the one that turns a source's
// memory into spans and takes them back. `span_pool` is the library's; a heap
// takes another from its options:
//
//   struct my_options : configured<heap_config{}> {
//       template <source S> using pool = my_pool<S>;   // a span_provider
//   };
//
// A type that is not a span_provider is refused with a message naming the
// first member it lacks (check_span_provider below).
#pragma once
#include <concepts>
#include <cstddef>

#include <allotheque/backend/span.hpp>
#include <allotheque/sources/source.hpp>

namespace allotheque::backend {

struct pool_stats {
    std::size_t os_bytes = 0;              // held from the source now (regions)
    std::size_t peak_os_bytes = 0;         // high-water mark of os_bytes
    std::size_t in_use_bytes = 0;          // in spans handed out
    std::size_t free_bytes = 0;            // in free ranges, ready for reuse
    std::size_t resident_free_bytes = 0;   // of which may still be resident (not decommitted)
    std::size_t returned_bytes = 0;        // given back to the source so far
    std::size_t decommitted_bytes = 0;     // decommitted so far
    std::size_t metadata_bytes = 0;        // span records
    std::size_t regions = 0;
};

namespace stage_requirement {
template <class P> concept source_type = requires { typename P::source_type; } && source<typename P::source_type>;
template <class P> concept take = requires(P& p, std::size_t n, const void* near) { { p.take(n, near) } -> std::same_as<span*>; };
template <class P> concept give = requires(P& p, span* s) { { p.give(s) } -> std::same_as<void>; };
template <class P> concept extend = requires(P& p, span* s, std::size_t n) { { p.extend(s, n) } -> std::same_as<bool>; };
template <class P> concept shrink = requires(P& p, span* s, std::size_t n) { { p.shrink(s, n) } -> std::same_as<bool>; };
template <class P> concept trim = requires(P& p) { { p.trim() } -> std::convertible_to<std::size_t>; };
template <class P> concept release_all = requires(P& p) { p.release_all(); };
template <class P> concept stats = requires(const P& p) { { p.stats() } -> std::same_as<pool_stats>; };
template <class P> concept from_source = source_type<P> && std::constructible_from<P, typename P::source_type>;
template <class P> concept get_source = source_type<P> && requires(P& p) { { p.source() } -> std::same_as<typename P::source_type&>; };
} // namespace stage_requirement

template <class P>
concept span_provider = stage_requirement::source_type<P> && stage_requirement::take<P> && stage_requirement::give<P> &&
                        stage_requirement::extend<P> && stage_requirement::shrink<P> && stage_requirement::trim<P> &&
                        stage_requirement::release_all<P> && stage_requirement::stats<P> &&
                        stage_requirement::get_source<P> && stage_requirement::from_source<P> &&
                        std::default_initializable<P>;

// One static_assert per requirement, so the error says which one is missing.
template <class P>
consteval bool check_span_provider() {
    static_assert(stage_requirement::source_type<P>, "allotheque::span_provider: needs `using source_type = S;` naming a source");
    static_assert(stage_requirement::take<P>, "allotheque::span_provider: needs `span* take(std::size_t bytes, const void* near)`");
    static_assert(stage_requirement::give<P>, "allotheque::span_provider: needs `void give(span*)`");
    static_assert(stage_requirement::extend<P>, "allotheque::span_provider: needs `bool extend(span*, std::size_t bytes)`");
    static_assert(stage_requirement::shrink<P>, "allotheque::span_provider: needs `bool shrink(span*, std::size_t bytes)`");
    static_assert(stage_requirement::trim<P>, "allotheque::span_provider: needs `std::size_t trim()`");
    static_assert(stage_requirement::release_all<P>, "allotheque::span_provider: needs `void release_all()`");
    static_assert(stage_requirement::stats<P>, "allotheque::span_provider: needs `pool_stats stats() const`");
    static_assert(stage_requirement::get_source<P>, "allotheque::span_provider: needs `source_type& source()`");
    static_assert(stage_requirement::from_source<P>, "allotheque::span_provider: needs a constructor taking its source");
    static_assert(std::default_initializable<P>, "allotheque::span_provider: needs a default constructor");
    return true;
}

} // namespace allotheque::backend
