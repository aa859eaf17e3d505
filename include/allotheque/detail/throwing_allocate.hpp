// allocate(r) for every heap and layer: try_allocate(r), or std::bad_alloc.
// One definition, so the two entry points can never disagree about failure.
#ifndef ALLOTHEQUE_DETAIL_THROWING_ALLOCATE_HPP
#define ALLOTHEQUE_DETAIL_THROWING_ALLOCATE_HPP

#include "../request.hpp"
#include "bad_alloc.hpp"

namespace allotheque::detail {

// CRTP base: Derived provides `void* try_allocate(const R&) noexcept`.
// Forced inline: left to the compiler, this wrapper around an always-inline
// try_allocate becomes a call taking the request by address, which costs a
// hand-written allocator's whole fast path again.
template <class Derived>
class throwing_allocate {
public:
    template <request_like R = request>
    [[nodiscard, gnu::always_inline]] inline void* allocate(const R& r) {
        void* p = static_cast<Derived*>(this)->try_allocate(r);
        if (!p) [[unlikely]]
            throw_bad_alloc();
        return p;
    }
};

} // namespace allotheque::detail

#endif
