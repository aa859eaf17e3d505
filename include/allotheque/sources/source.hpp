// The source concept: where a heap gets system memory.
//
// allocate(n, near) returns n bytes (n a multiple of the page size) aligned to
// a page, or nullptr when the system refuses; `near` is an address the memory
// should be close to, which a source may ignore. deallocate(p, n) takes back
// exactly a range allocate returned.
#pragma once
#include <concepts>
#include <cstddef>

namespace allotheque {

template <class S>
concept source = requires(S& s, std::size_t n, const void* near, void* p) {
    { s.allocate(n, near) } -> std::same_as<void*>;
    { s.deallocate(p, n) } -> std::same_as<void>;
};

} // namespace allotheque
