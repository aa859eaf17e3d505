// `immortal<T>()`: one T per program, built on first use and never destroyed.
// Process-wide state of a source lives here: heaps in static storage give
// memory back during exit, after every static destructor may have run.
#pragma once
#include <new>

namespace allotheque::detail {

template <class T>
T& immortal() noexcept {
    alignas(T) static unsigned char storage[sizeof(T)];
    static T* t = ::new (static_cast<void*>(storage)) T();
    return *t;
}

} // namespace allotheque::detail
