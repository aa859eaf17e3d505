// System memory from the C library's aligned_alloc: portable, and what a heap
// nested inside another allocator wants.
#pragma once
#include <cstddef>
#include <cstdlib>

#include <allotheque/detail/bits.hpp>
#include <allotheque/sources/source.hpp>

namespace allotheque {

struct malloc_source {
    void* allocate(std::size_t n, const void* /*near: ignored*/) noexcept {
        return std::aligned_alloc(detail::page_size, n);
    }
    void deallocate(void* p, std::size_t) noexcept { std::free(p); }
};

static_assert(source<malloc_source>);

} // namespace allotheque
