// Zero-filled, lazily committed storage straight from mmap: large class tables
// cost address space, not memory, until a class is used. Kept out of the heap's
// own source on purpose: it is metadata, and it must exist before any chunk does.
#pragma once
#include <sys/mman.h>

#include <cstddef>
#include <utility>

#include <allotheque/detail/bad_alloc.hpp>

namespace allotheque::detail {

#if !__cpp_exceptions
// Built without exceptions (the shipped malloc libraries are, so that a C
// program they are preloaded into need not load libstdc++), a failed mapping
// has no bad_alloc to throw. A builder that can answer one (thread_registry's
// make: that thread's malloc returns NULL) points this at a flag, and the
// array stays empty; with none, the failure is throw_bad_alloc's abort.
inline constinit thread_local bool* mapping_failed [[gnu::tls_model("initial-exec")]] = nullptr;
#endif

template <class T>
class mapped_array {
public:
    mapped_array() = default;
    explicit mapped_array(std::size_t count) : count_(count) {
        if (count == 0) return;
        void* p = ::mmap(nullptr, bytes(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) [[unlikely]] {
#if !__cpp_exceptions
            if (mapping_failed) {
                *mapping_failed = true;
                count_ = 0;
                return;
            }
#endif
            throw_bad_alloc();
        }
        data_ = static_cast<T*>(p);
    }
    mapped_array(const mapped_array&) = delete;
    mapped_array& operator=(const mapped_array&) = delete;
    mapped_array(mapped_array&& o) noexcept
        : data_(std::exchange(o.data_, nullptr)), count_(std::exchange(o.count_, 0)) {}
    ~mapped_array() {
        if (data_) ::munmap(data_, bytes());
    }
    T& operator[](std::size_t i) noexcept { return data_[i]; }
    const T& operator[](std::size_t i) const noexcept { return data_[i]; }
    T* data() noexcept { return data_; }
    std::size_t size() const noexcept { return count_; }
    std::size_t bytes() const noexcept { return count_ * sizeof(T); }

private:
    T* data_ = nullptr;
    std::size_t count_ = 0;
};

} // namespace allotheque::detail
