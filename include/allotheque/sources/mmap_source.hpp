// System memory from anonymous mmap. The locality hint becomes mmap's address
// hint: the kernel places the mapping there when that range is free, which is
// as close as a source can put fresh memory to where it is wanted.
#pragma once
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>

#include <allotheque/detail/bits.hpp>
#include <allotheque/sources/source.hpp>

namespace allotheque {

struct mmap_source {
    void* allocate(std::size_t n, const void* near) noexcept {
        void* want = reinterpret_cast<void*>(detail::address_of(near) & ~(detail::page_size - 1));
        void* p = ::mmap(want, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? nullptr : p;
    }
    void deallocate(void* p, std::size_t n) noexcept { ::munmap(p, n); }
};

static_assert(source<mmap_source>);

} // namespace allotheque
