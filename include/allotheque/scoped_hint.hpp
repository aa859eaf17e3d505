// `near(p)`: for the lifetime of the returned object, allocations through
// allotheque::allocator on this thread are hinted to land near p. Code that
// knows which object a new one will be used with says so without threading the
// hint through a container that cannot carry it. Scopes nest.
#pragma once

namespace allotheque {

namespace detail {
inline const void*& scoped_hint_slot() noexcept {
    thread_local const void* hint = nullptr;
    return hint;
}
} // namespace detail

class [[nodiscard]] scoped_hint {
public:
    explicit scoped_hint(const void* p) noexcept : saved_(detail::scoped_hint_slot()) { detail::scoped_hint_slot() = p; }
    scoped_hint(const scoped_hint&) = delete;
    scoped_hint& operator=(const scoped_hint&) = delete;
    ~scoped_hint() { detail::scoped_hint_slot() = saved_; }

private:
    const void* saved_;
};

inline scoped_hint near(const void* p) noexcept { return scoped_hint(p); }

inline const void* current_scoped_hint() noexcept { return detail::scoped_hint_slot(); }

} // namespace allotheque
