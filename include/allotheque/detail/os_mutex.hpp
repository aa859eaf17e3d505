// `os_mutex`: pthread's mutex as a Lockable whose lock cannot throw.
// std::mutex is the same mutex, but its lock reports failure through
// libstdc++'s system_error, and a source used by a malloc library must not
// need libstdc++ (malloc/cxx_runtime.hpp); in a noexcept function it also
// costs a terminate landing pad. pthread_mutex_lock on a default mutex fails
// only on deadlock detection, which a default mutex does not do.
#pragma once
#include <pthread.h>

namespace allotheque::detail {

class os_mutex {
public:
    constexpr os_mutex() noexcept = default;
    os_mutex(const os_mutex&) = delete;
    os_mutex& operator=(const os_mutex&) = delete;

    void lock() noexcept { ::pthread_mutex_lock(&m_); }
    bool try_lock() noexcept { return ::pthread_mutex_trylock(&m_) == 0; }
    void unlock() noexcept { ::pthread_mutex_unlock(&m_); }

private:
    pthread_mutex_t m_ = PTHREAD_MUTEX_INITIALIZER;
};

} // namespace allotheque::detail
