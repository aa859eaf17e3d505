// `layer<Derived, Parent>`: the base of every layer (Heap Layers' mixins). It
// holds the parent heap and forwards everything; a layer overrides only what
// it changes, and the base routes around the override instead of bypassing it:
//
//   - a layer that overrides try_allocate gets allocate() = "try_allocate or
//     throw std::bad_alloc"; one that overrides allocate gets try_allocate() =
//     "allocate, nullptr if it throws" — so a layer stacked on top, which calls
//     try_allocate, still goes through the user's allocate;
//   - a layer that overrides deallocate(p, r) gets deallocate_run() as a loop
//     over its deallocate (not the parent's run, which would skip it);
//   - optional members (deallocate(p), usable_size, deallocate_all, trim,
//     stats, last_allocation, owns, owner_of, set_owner_tag, try_resize) exist
//     exactly when the parent has them.
//
// How the base knows: each of its members takes a trailing defaulted argument
// of type `layer_base_only`; a member of the same name in the layer hides it,
// which `requires` can see. Callers never pass it. (C++ name hiding applies: a
// layer that declares deallocate(p, r) hides deallocate(p) too, unless it adds
// `using layer::deallocate;`.)
#pragma once
#include <cstddef>
#include <new>
#include <utility>

#include <allotheque/detail/bad_alloc.hpp>
#include <allotheque/layers/heap_concept.hpp>
#include <allotheque/request.hpp>

namespace allotheque::layers {

struct layer_base_only {};

// Whether a layer kept the base's member (true) or declared its own.
template <class D>
concept keeps_allocate = requires(D& d, const request& r) { d.allocate(r, layer_base_only{}); };
template <class D>
concept keeps_try_allocate = requires(D& d, const request& r) { d.try_allocate(r, layer_base_only{}); };
template <class D>
concept keeps_deallocate = requires(D& d, void* p, const request& r) { d.deallocate(p, r, layer_base_only{}); };

template <class Derived, class Parent>
class layer {
    static_assert(heap<Parent>,
                  "allotheque::layers: the parent does not satisfy allotheque::layers::heap (needs allocate(r), "
                  "try_allocate(r), deallocate(p, r), good_size(n, a) and Parent::max_alignment)");

public:
    using parent_type = Parent;
    static constexpr std::size_t max_alignment = Parent::max_alignment;
    static constexpr std::size_t granularity = granularity_of<Parent>;
    static constexpr bool locality_aware = locality_aware_of<Parent>;

    layer() = default;
    template <class... Args>
    explicit layer(std::in_place_t, Args&&... args) : parent_(std::forward<Args>(args)...) {}
    layer(const layer&) = delete;
    layer& operator=(const layer&) = delete;

    std::size_t good_size(std::size_t n, std::size_t a = 0, layer_base_only = {}) const noexcept {
        return parent_.good_size(n, a);
    }

    template <request_like R = request>
    [[nodiscard]] void* allocate(const R& r, layer_base_only = {}) {
        if constexpr (!keeps_try_allocate<Derived>) {
            void* p = derived().try_allocate(r);
            if (!p) [[unlikely]]
                allotheque::detail::throw_bad_alloc();
            return p;
        } else {
            return parent_.allocate(r);
        }
    }
    template <request_like R = request>
    [[nodiscard]] void* try_allocate(const R& r, layer_base_only = {}) noexcept {
        if constexpr (!keeps_allocate<Derived>) {
            try {
                return derived().allocate(r);
            } catch (...) {
                return nullptr;
            }
        } else {
            return parent_.try_allocate(r);
        }
    }
    void deallocate(void* p, const request& r, layer_base_only = {}) noexcept { parent_.deallocate(p, r); }

    void deallocate(void* p, layer_base_only = {}) noexcept
        requires has_unsized_deallocate<Parent>
    {
        parent_.deallocate(p);
    }
    std::size_t usable_size(const void* p, layer_base_only = {}) const noexcept
        requires has_usable_size<Parent>
    {
        return parent_.usable_size(p);
    }
    void deallocate_run(void* const* ps, std::size_t n, const request& r, layer_base_only = {}) noexcept
        requires has_deallocate_run<Parent>
    {
        if constexpr (keeps_deallocate<Derived>) {
            parent_.deallocate_run(ps, n, r);
        } else {
            for (std::size_t i = 0; i < n; ++i)
                if (ps[i]) derived().deallocate(ps[i], r);
        }
    }
    void deallocate_all(layer_base_only = {}) noexcept
        requires has_deallocate_all<Parent>
    {
        parent_.deallocate_all();
    }
    std::size_t trim(layer_base_only = {}) noexcept
        requires has_trim<Parent>
    {
        return parent_.trim();
    }
    auto stats(layer_base_only = {}) const noexcept
        requires has_stats<Parent>
    {
        return parent_.stats();
    }
    const void* last_allocation(layer_base_only = {}) const noexcept
        requires has_last_allocation<Parent>
    {
        return parent_.last_allocation();
    }
    bool owns(const void* p, layer_base_only = {}) const noexcept
        requires has_owns<Parent>
    {
        return parent_.owns(p);
    }
    static const void* owner_of(const void* p, layer_base_only = {}) noexcept
        requires has_owner<Parent>
    {
        return Parent::owner_of(p);
    }
    void set_owner_tag(const void* tag, layer_base_only = {}) noexcept
        requires has_owner<Parent>
    {
        parent_.set_owner_tag(tag);
    }

    Parent& parent() noexcept { return parent_; }
    const Parent& parent() const noexcept { return parent_; }

protected:
    Derived& derived() noexcept { return static_cast<Derived&>(*this); }
    const Derived& derived() const noexcept { return static_cast<const Derived&>(*this); }

    Parent parent_;
};

} // namespace allotheque::layers
