// `allocator<T, Heap, HintPolicy>`: the std::allocator-compatible face of a
// heap. Copies and rebinds share the heap (a non-owning pointer), compare equal
// exactly when they share it, and propagate with the container so that memory
// always returns to the heap it came from.
//
// Hints, strongest first: allocate(n, hint) (what allocator_traits passes on),
// an enclosing near(p) scope, then the policy (default: near the previous
// allocation for locality heaps, none otherwise).
// Bad input: n * sizeof(T) overflowing throws std::bad_array_new_length; the heap
// refusing throws std::bad_alloc; n == 0 returns a valid, unique block;
// alignof(T) beyond the heap's max_alignment does not compile, nor does a
// container built without an allocator (there is no default heap).
#pragma once
#include <cstddef>
#include <limits>
#include <new>
#include <type_traits>

#include <allotheque/hint_policy.hpp>
#include <allotheque/request.hpp>
#include <allotheque/scoped_hint.hpp>

namespace allotheque {

template <class H>
concept heap_like = requires(H& h, const request& r, void* p) {
    { h.allocate(r) } -> std::same_as<void*>;
    { h.deallocate(p, r) } -> std::same_as<void>;
    { H::max_alignment } -> std::convertible_to<std::size_t>;
};

template <class T, heap_like Heap, class HintPolicy = typename default_hint_policy<Heap>::type>
class allocator {
    static_assert(alignof(T) <= Heap::max_alignment,
                  "allotheque::allocator: alignof(T) exceeds what this heap can guarantee (Heap::max_alignment)");
    static_assert(hint_policy<HintPolicy, Heap>, "allotheque::allocator: HintPolicy needs static hint(const Heap&)");

public:
    using value_type = T;
    using size_type = std::size_t;
    using difference_type = std::ptrdiff_t;
    using heap_type = Heap;
    using propagate_on_container_copy_assignment = std::true_type;
    using propagate_on_container_move_assignment = std::true_type;
    using propagate_on_container_swap = std::true_type;
    using is_always_equal = std::false_type;
    template <class U>
    struct rebind {
        using other = allocator<U, Heap, HintPolicy>;
    };

    // There is no default heap to share. The compiler quotes this line under
    // its error, so the reason is on it:
    allocator() = delete;   // allotheque::allocator needs its heap: Container c(allocator<T, H>{heap});
    explicit allocator(Heap& h) noexcept : heap_(&h) {}
    template <class U>
    allocator(const allocator<U, Heap, HintPolicy>& o) noexcept : heap_(&o.heap()) {}

    [[nodiscard]] T* allocate(std::size_t n) { return allocate(n, nullptr); }
    [[nodiscard]] T* allocate(std::size_t n, const void* hint) {
        if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_array_new_length();
        if (!hint) hint = current_scoped_hint();
        if (!hint) hint = HintPolicy::hint(*heap_);
        return static_cast<T*>(heap_->allocate(request{n * sizeof(T), hint, alignment()}));
    }
    void deallocate(T* p, std::size_t n) noexcept {
        heap_->deallocate(p, request{n * sizeof(T), nullptr, alignment()});
    }
    std::size_t max_size() const noexcept { return std::numeric_limits<std::ptrdiff_t>::max() / 2 / sizeof(T); }

    Heap& heap() const noexcept { return *heap_; }

    template <class U>
    bool operator==(const allocator<U, Heap, HintPolicy>& o) const noexcept { return heap_ == &o.heap(); }

private:
    // Types that need no more than the heap's granularity ask for nothing, so
    // they keep the heap's size classes exact.
    static constexpr std::size_t alignment() noexcept { return alignof(T) <= 8 ? 0 : alignof(T); }
    Heap* heap_;
};

} // namespace allotheque
