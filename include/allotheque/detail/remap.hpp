// What mremap(MREMAP_FIXED) leaves to its caller when the target is a range
// the caller reserved (arena_source::move). The kernel unmaps the target
// before it looks at the source, so a failure may leave the target's
// addresses unmapped; and the addresses a moved range leaves behind are
// unmapped too. Between that and the caller's next step another thread's
// mmap may take any of them: nothing here may unmap or overwrite addresses
// that are not certainly the caller's.
#pragma once
#include <sys/mman.h>

#include <cerrno>
#include <cstddef>

#include <allotheque/detail/bits.hpp>

namespace allotheque::detail {

// Whether [p, p+n) lies in one mapping of the kernel's, asked before a move:
// mremap fails with EFAULT when the source spans two (a range of an arena
// next to addresses mapped again by map_again, or half mprotect'ed by the
// program), after it has unmapped the target. A request to grow the range by
// a page in place fails the same way first, and otherwise moves nothing: it
// fails too (ENOMEM) or grows a range that ends its mapping into free
// addresses, which are unmapped again at once.
inline bool one_mapping(std::byte* p, std::size_t n) noexcept {
    void* r = ::mremap(p, n, n + page_size, 0);
    if (r == MAP_FAILED) return errno != EFAULT;
    ::munmap(p + n, page_size);
    return true;
}

// Maps [p, p+n) again, fresh (reads as zero), where the kernel may have
// unmapped it. True: the range is one mapping of the caller's now. False:
// this call mapped nothing there, because some of those addresses are mapped
// (by the caller still, or by anybody since: the two cannot be told apart,
// so the range must be forgotten, never unmapped), or because the kernel
// predates MAP_FIXED_NOREPLACE (4.17) and took it as a hint elsewhere.
inline bool map_again(void* p, std::size_t n) noexcept {
    void* m = ::mmap(p, n, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (m == p) return true;
    if (m != MAP_FAILED) ::munmap(m, n);
    return false;
}

} // namespace allotheque::detail
