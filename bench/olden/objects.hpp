// Allocating and releasing a program's objects through a policy: one block per
// object (or per array), constructed in place, destroyed before it goes back.
// Shared by the Olden programs so that each one states only its algorithm.
#pragma once
#include <cstddef>
#include <memory>
#include <new>

#include "../common/policy.hpp"

namespace bench::olden {

template <class T, bench::policy P>
T* alloc_obj(P& a, const void* hint) {
    void* m = a.allocate(sizeof(T), hint);
    if (m == nullptr) throw std::bad_alloc();
    return ::new (m) T{};
}

template <class T, bench::policy P>
void free_obj(P& a, T* p) {
    p->~T();
    a.deallocate(p, sizeof(T));
}

template <class T, bench::policy P>
T* alloc_arr(P& a, std::size_t n, const void* hint) {
    void* m = a.allocate(n * sizeof(T), hint);
    if (m == nullptr) throw std::bad_alloc();
    T* p = static_cast<T*>(m);
    std::uninitialized_value_construct_n(p, n);
    return p;
}

template <class T, bench::policy P>
void free_arr(P& a, T* p, std::size_t n) {
    std::destroy_n(p, n);
    a.deallocate(p, n * sizeof(T));
}

} // namespace bench::olden
