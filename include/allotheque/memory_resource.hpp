// `memory_resource<Heap>`: a heap behind std::pmr. Equality is identity (memory
// from one heap cannot be freed by another). Unsupported alignment and
// exhaustion throw std::bad_alloc, as pmr requires.
#pragma once
#include <cstddef>
#include <memory_resource>
#include <new>

#include <allotheque/detail/bits.hpp>
#include <allotheque/request.hpp>

namespace allotheque {

template <class Heap>
class memory_resource final : public std::pmr::memory_resource {
public:
    explicit memory_resource(Heap& h) noexcept : heap_(&h) {}
    Heap& heap() const noexcept { return *heap_; }

private:
    void* do_allocate(std::size_t bytes, std::size_t alignment) override {
        return heap_->allocate(request{bytes, nullptr, normal(alignment)});
    }
    void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override {
        heap_->deallocate(p, request{bytes, nullptr, normal(alignment)});
    }
    bool do_is_equal(const std::pmr::memory_resource& o) const noexcept override { return this == &o; }
    // Alignments up to 8 are what every heap gives anyway; a value that is not
    // a power of two goes to the heap as is, which refuses it (bad_alloc).
    static std::size_t normal(std::size_t a) noexcept { return a <= 8 && detail::is_pow2(a) ? 0 : a; }

    Heap* heap_;
};

} // namespace allotheque
