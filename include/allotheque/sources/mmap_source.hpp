// System memory from anonymous mmap. The locality hint becomes mmap's address
// hint: the kernel places the mapping there when that range is free, which is
// as close as a source can put fresh memory to where it is wanted. Fresh
// mappings read as zero; decommit is madvise(MADV_DONTNEED), after which the
// pages read as zero again and are no longer resident.
#pragma once
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>

#include <allotheque/detail/bits.hpp>
#include <allotheque/sources/source.hpp>

namespace allotheque {

struct mmap_source {
    static constexpr bool zeroed = true;
    void* allocate(std::size_t n, const void* near) noexcept {
        void* want = reinterpret_cast<void*>(detail::address_of(near) & ~(detail::page_size - 1));
        void* p = ::mmap(want, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? nullptr : p;
    }
    void deallocate(void* p, std::size_t n) noexcept { ::munmap(p, n); }
    bool decommit(void* p, std::size_t n) noexcept { return ::madvise(p, n, MADV_DONTNEED) == 0; }
};

static_assert(source<mmap_source> && decommitting_source<mmap_source>);

} // namespace allotheque
