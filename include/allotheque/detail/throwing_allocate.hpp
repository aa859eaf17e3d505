// allocate(r) for every heap and layer: try_allocate(r), or std::bad_alloc.
// One definition, so the two entry points can never disagree about failure.
#ifndef ALLOTHEQUE_DETAIL_THROWING_ALLOCATE_HPP
#define ALLOTHEQUE_DETAIL_THROWING_ALLOCATE_HPP

#include <new>

#include "../request.hpp"

namespace allotheque::detail {

// CRTP base: Derived provides `void* try_allocate(const R&) noexcept`.
template <class Derived>
class throwing_allocate {
public:
    template <request_like R = request>
    [[nodiscard]] void* allocate(const R& r) {
        void* p = static_cast<Derived*>(this)->try_allocate(r);
        if (!p) throw std::bad_alloc();
        return p;
    }
};

} // namespace allotheque::detail

#endif
