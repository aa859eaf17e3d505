// A standard-library allocator over a bench::policy, for the benchmark
// programs that keep their data in STL containers (debruijn, md).
//
// Standard containers never pass a locality hint, so the adapter supplies one:
// every allocation is hinted with the previous allocation made through the
// same stl_context (a list node lands near the node allocated before it,
// which for push_back is its predecessor). The context is shared by every
// rebound copy, so a std::map's node allocator and the std::list allocators
// stored inside its values all feed the same "last" pointer.
//
// The hint may point to memory that has been freed since; a policy only uses
// a hint as an address and never dereferences it.
#pragma once
#include <cstddef>
#include <limits>
#include <new>

#include "policy.hpp"

namespace bench {

// Shared state of all allocators built from one policy: the policy and the
// address of the most recent allocation.
template <policy P>
struct stl_context {
    P* alloc;
    const void* last = nullptr;

    explicit stl_context(P& p) noexcept : alloc(&p) {}
};

template <class T, policy P>
struct stl_allocator {
    using value_type = T;

    stl_context<P>* ctx;

    explicit stl_allocator(stl_context<P>& c) noexcept : ctx(&c) {}

    template <class U>
    stl_allocator(const stl_allocator<U, P>& other) noexcept : ctx(other.ctx) {}

    template <class U>
    struct rebind {
        using other = stl_allocator<U, P>;
    };

    [[nodiscard]] T* allocate(std::size_t n) {
        if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_array_new_length();
        void* p = ctx->alloc->allocate(n * sizeof(T), ctx->last);
        if (p == nullptr) throw std::bad_alloc();
        ctx->last = p;
        return static_cast<T*>(p);
    }

    void deallocate(T* p, std::size_t n) noexcept { ctx->alloc->deallocate(p, n * sizeof(T)); }

    // Two adapters are interchangeable when they draw from the same policy.
    template <class U>
    friend bool operator==(const stl_allocator& a, const stl_allocator<U, P>& b) noexcept {
        return a.ctx->alloc == b.ctx->alloc;
    }
};

} // namespace bench
