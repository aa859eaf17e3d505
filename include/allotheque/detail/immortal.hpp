// `immortal<T>()`: one T per program, built on first use and never destroyed.
// Process-wide state of a source lives here: heaps in static storage give
// memory back during exit, after every static destructor may have run.
//
// pthread_once rather than a function-local static: the latter's guard is
// libstdc++'s (__cxa_guard_acquire), and a malloc library must not need
// libstdc++ (malloc/cxx_runtime.hpp). The flag keeps the built case inline.
#pragma once
#include <pthread.h>

#include <atomic>
#include <new>

namespace allotheque::detail {

template <class T>
struct immortal_slot {
    alignas(T) static inline unsigned char storage[sizeof(T)];
    static inline constinit pthread_once_t once = PTHREAD_ONCE_INIT;
    static inline constinit std::atomic<bool> built{false};
    static void build() noexcept {
        ::new (static_cast<void*>(storage)) T();
        built.store(true, std::memory_order_release);
    }
};

template <class T>
T& immortal() noexcept {
    using slot = immortal_slot<T>;
    if (!slot::built.load(std::memory_order_acquire)) [[unlikely]]
        ::pthread_once(&slot::once, slot::build);
    return *std::launder(reinterpret_cast<T*>(slot::storage));
}

} // namespace allotheque::detail
