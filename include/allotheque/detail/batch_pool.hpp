// Where remote-free batches (detail/remote_list.hpp's remote_batch) come
// from: memory mapped 64 KiB at a time and carved into batches, kept on a
// free list, never unmapped before release_all(). Not synchronised: its
// owner (a thread_registry) calls it under a lock of its own.
#pragma once
#include <sys/mman.h>

#include <cstddef>

#include <allotheque/detail/remote_list.hpp>

namespace allotheque::detail {

class batch_pool {
public:
    // Under the caller's lock. nullptr when no memory is left.
    remote_batch* take() noexcept {
        if (free_.empty()) {
            void* m = ::mmap(nullptr, chunk_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (m == MAP_FAILED) return nullptr;
            auto* c = static_cast<chunk*>(m);
            c->next = chunks_;
            chunks_ = c;
            // The chunk's first batch-sized piece holds its link.
            auto* b = reinterpret_cast<remote_batch*>(m);
            for (std::size_t i = chunk_bytes / sizeof(remote_batch) - 1; i > 0; --i) give(b + i);
        }
        return free_.pop();
    }
    // Under the caller's lock.
    void give(remote_batch* b) noexcept { free_.push(b); }
    // Every batch goes with the memory (nothing may use one any more).
    void release_all() noexcept {
        while (chunks_) {
            chunk* next = chunks_->next;
            ::munmap(chunks_, chunk_bytes);
            chunks_ = next;
        }
        free_.clear();
    }

private:
    static constexpr std::size_t chunk_bytes = 64 * 1024;
    struct chunk {
        chunk* next;
    };
    batch_stack free_;
    chunk* chunks_ = nullptr;
};

} // namespace allotheque::detail
