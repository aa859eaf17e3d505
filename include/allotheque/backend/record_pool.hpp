// Fixed-size records (span descriptors) in slabs taken from a source: the
// back end's own metadata allocator. Records are never freed to the system
// one by one; a freed record goes on a free list and the slabs go back when
// the pool is released, so metadata costs at most the peak number of records.
// Not thread-safe: its owner (a heap, or a source behind its lock) serialises.
#pragma once
#include <cstddef>
#include <new>

#include <allotheque/detail/bits.hpp>
#include <allotheque/sources/source.hpp>

namespace allotheque::backend {

template <class T, std::size_t SlabBytes = 16 * 1024>
class record_pool {
    static_assert(SlabBytes % detail::page_size == 0, "record_pool: slabs are whole pages");
    union cell {
        cell* next;
        alignas(T) std::byte raw[sizeof(T)];
    };
    struct slab_header {
        slab_header* next;
    };
    static constexpr std::size_t first_cell = detail::round_up(sizeof(slab_header), alignof(cell));
    static constexpr std::size_t cells_per_slab = (SlabBytes - first_cell) / sizeof(cell);
    static_assert(cells_per_slab >= 8, "record_pool: slab too small for the record");

public:
    static constexpr std::size_t slab_bytes = SlabBytes;

    record_pool() = default;
    record_pool(const record_pool&) = delete;
    record_pool& operator=(const record_pool&) = delete;

    // A value-initialised record, or nullptr when the source refuses a slab.
    template <source S>
    T* make(S& src) noexcept {
        cell* c = free_;
        if (c) {
            free_ = c->next;
        } else {
            if (fresh_ == fresh_end_ && !grow(src)) return nullptr;
            c = fresh_++;
        }
        ++live_;
        return ::new (static_cast<void*>(c->raw)) T();
    }
    void recycle(T* t) noexcept {
        t->~T();
        auto* c = reinterpret_cast<cell*>(t);
        c->next = free_;
        free_ = c;
        --live_;
    }
    // Gives every slab back; records still in use become invalid.
    template <source S>
    void release_all(S& src) noexcept {
        while (slabs_) {
            slab_header* s = slabs_;
            slabs_ = s->next;
            src.deallocate(s, SlabBytes);
        }
        free_ = fresh_ = fresh_end_ = nullptr;
        live_ = 0;
        slab_count_ = 0;
    }
    std::size_t live() const noexcept { return live_; }
    std::size_t bytes() const noexcept { return slab_count_ * SlabBytes; }

private:
    template <source S>
    bool grow(S& src) noexcept {
        void* m = src.allocate(SlabBytes, nullptr);
        if (!m) return false;
        auto* s = ::new (m) slab_header{slabs_};
        slabs_ = s;
        ++slab_count_;
        // Cells are handed out from the front of the newest slab before any
        // free list is threaded through them: a slab's pages become resident
        // only as records are used (a small heap touches one page, not four).
        fresh_ = reinterpret_cast<cell*>(static_cast<std::byte*>(m) + first_cell);
        fresh_end_ = fresh_ + cells_per_slab;
        return true;
    }

    cell* free_ = nullptr;   // recycled records
    cell* fresh_ = nullptr;  // the newest slab's cells never handed out
    cell* fresh_end_ = nullptr;
    slab_header* slabs_ = nullptr;
    std::size_t live_ = 0, slab_count_ = 0;
};

} // namespace allotheque::backend
