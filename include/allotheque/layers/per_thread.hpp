// `per_thread<H>`: one heap of type H per thread (Heap Layers' ThreadHeap,
// mimalloc/snmalloc-style remote frees). A thread's heap is created on its first
// allocation through this object and serves that thread without any lock.
//
// Blocks carry a 16-byte header just before the user pointer (more when the
// request asks for an alignment above 16: the header then takes `alignment`
// bytes) recording the owning heap. Freeing:
//   - on the owning thread: straight back into its heap;
//   - on any other thread: the block is pushed onto the owner's lock-free remote
//     free list (a Treiber stack threaded through the freed blocks' headers, which
//     then hold the link and the request's size and alignment); the owner drains
//     the whole list with one exchange at its next allocation (or collect()).
// The header approach works over any parent heap (no page map, no owns() or
// address ranges needed) at 16 bytes per block.
//
// Lifetime: heaps live in a registry owned by the per_thread object and are
// destroyed with it, never with their thread, so a block may outlive the thread
// that allocated it. When a thread exits its heap is marked orphaned (remote
// frees keep arriving on its list); the next thread to start allocating adopts
// an orphaned heap, drains it and reuses its memory, so thread churn does not
// grow the registry beyond the peak number of concurrent threads.
//
// Thread safety: allocate, try_allocate, deallocate, good_size, collect,
// last_allocation, stats (this thread's heap) and remote_frees may be called
// from any thread concurrently; a block may be freed on any thread.
// deallocate_all, collect_all, for_each_heap and the destructor need quiescence: no other
// thread may be using this object. The object must outlive all use by threads.
// H itself needs no thread safety: only one thread uses a heap at a time.
// Cost: a thread_local lookup (one compare on the fast path) per call, 16 bytes
// per block; a remote free is one CAS on the owner's list.
#pragma once
#include <atomic>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <utility>
#include <vector>

#include <allotheque/detail/throwing_allocate.hpp>
#include <allotheque/layers/heap_concept.hpp>
#include <allotheque/request.hpp>

namespace allotheque::layers {

template <class H>
class per_thread : public detail::throwing_allocate<per_thread<H>> {
    static_assert(heap<H>,
                  "allotheque::layers::per_thread<H>: H does not satisfy allotheque::layers::heap (needs allocate(r), "
                  "try_allocate(r), deallocate(p, r), good_size(n, a) and H::max_alignment)");
    static_assert(std::default_initializable<H>,
                  "allotheque::layers::per_thread<H>: heaps are created lazily, so H must be default-constructible");

    struct slot;
    // Live block: link = the owning slot. On a remote list: link = next header,
    // word = (request size << 8) | log2(parent alignment) (0 for natural).
    struct header {
        std::uintptr_t link;
        std::uint64_t word;
    };
    static constexpr std::size_t header_bytes = sizeof(header);
    static_assert(header_bytes == 16);

    struct slot {
        std::optional<H> heap;
        std::atomic<header*> remote{nullptr};
        std::atomic<bool> orphaned{false};   // its thread exited; free for adoption
        std::atomic<bool> retired{false};    // the per_thread object is gone
        std::atomic<std::size_t> remote_frees{0};
    };
    struct tls_entry {
        std::uint64_t id;
        std::shared_ptr<slot> s;
    };
    struct tls_cache {
        std::uint64_t last_id = 0;
        slot* last = nullptr;
        std::vector<tls_entry> entries;
        ~tls_cache() {
            for (auto& e : entries) e.s->orphaned.store(true, std::memory_order_release);
        }
    };
    static tls_cache& cache() noexcept {
        static thread_local tls_cache c;
        return c;
    }
    static std::uint64_t next_id() noexcept {
        static std::atomic<std::uint64_t> n{0};
        return n.fetch_add(1, std::memory_order_relaxed) + 1;
    }

    // The header size and the alignment asked of the parent for alignment a.
    struct shape {
        std::size_t hdr, parent_alignment;
        bool ok;
    };
    static constexpr shape shape_of(std::size_t a) noexcept {
        if (a != 0 && (a & (a - 1)) != 0) return {0, 0, false};
        if (a > H::max_alignment) return {0, 0, false};
        if (a <= 8) return {header_bytes, 0, true};
        if (a <= header_bytes) return {header_bytes, a, true};
        return {a, a, true};
    }

public:
    using parent_type = H;
    static constexpr std::size_t max_alignment = H::max_alignment;
    static constexpr std::size_t granularity = granularity_of<H>;
    static constexpr bool locality_aware = locality_aware_of<H>;
    // Requests above this are refused (the size must fit the remote-free record).
    static constexpr std::size_t max_size = std::size_t{1} << 48;

    per_thread() = default;
    per_thread(const per_thread&) = delete;
    per_thread& operator=(const per_thread&) = delete;
    ~per_thread() {
        std::lock_guard g(registry_lock_);
        for (auto& s : slots_) {
            s->retired.store(true, std::memory_order_release);
            s->remote.store(nullptr, std::memory_order_relaxed);   // those blocks go with the heap
            s->heap.reset();
        }
    }

    std::size_t good_size(std::size_t n, std::size_t a = 0) const noexcept {
        const shape sh = shape_of(a);
        if (!sh.ok || n > max_size) return 0;
        std::size_t g = 0;
        if constexpr (requires { H::good_size(n, a); }) {
            g = H::good_size(n + sh.hdr, sh.parent_alignment);   // static in allotheque::heap
        } else {   // a layer: ask this thread's heap (created if need be)
            const slot* s = mine_or_new();
            if (!s) return 0;
            g = std::as_const(*s->heap).good_size(n + sh.hdr, sh.parent_alignment);
        }
        return g == 0 ? 0 : g - sh.hdr;
    }

    template <request_like R = request>
    [[nodiscard]] void* try_allocate(const R& r) noexcept {
        const shape sh = shape_of(r.alignment);
        if (!sh.ok || r.size > max_size) return nullptr;
        slot* s = mine_or_new();
        if (!s) return nullptr;
        if (s->remote.load(std::memory_order_relaxed) != nullptr) drain(*s);
        R q = r;
        q.size = r.size + sh.hdr;
        q.alignment = sh.parent_alignment;
        auto* base = static_cast<std::byte*>(s->heap->try_allocate(q));
        if (!base) return nullptr;
        std::byte* user = base + sh.hdr;
        ::new (static_cast<void*>(user - header_bytes)) header{reinterpret_cast<std::uintptr_t>(s), 0};
        return user;
    }

    void deallocate(void* p, const request& r) noexcept {
        if (!p) return;
        const shape sh = shape_of(r.alignment);
        auto* user = static_cast<std::byte*>(p);
        auto* h = std::launder(reinterpret_cast<header*>(user - header_bytes));
        auto* owner = reinterpret_cast<slot*>(h->link);
        if (owner == mine()) {
            owner->heap->deallocate(user - sh.hdr, request{r.size + sh.hdr, nullptr, sh.parent_alignment});
            return;
        }
        const unsigned code = sh.parent_alignment == 0 ? 0u : static_cast<unsigned>(std::countr_zero(sh.parent_alignment));
        h->word = (static_cast<std::uint64_t>(r.size) << 8) | code;
        header* head = owner->remote.load(std::memory_order_relaxed);
        do {
            h->link = reinterpret_cast<std::uintptr_t>(head);
        } while (!owner->remote.compare_exchange_weak(head, h, std::memory_order_release, std::memory_order_relaxed));
        owner->remote_frees.fetch_add(1, std::memory_order_relaxed);
    }

    // Takes back the blocks other threads freed into this thread's heap now
    // instead of at the next allocation.
    void collect() noexcept {
        if (slot* s = mine()) drain(*s);
    }

    // This thread's heap's statistics (value-initialised when it has none yet).
    auto stats() const noexcept
        requires has_stats<H>
    {
        using result = decltype(std::declval<const H&>().stats());
        const slot* s = mine();
        return s ? s->heap->stats() : result{};
    }
    const void* last_allocation() const noexcept
        requires has_last_allocation<H>
    {
        const slot* s = mine();
        return s ? s->heap->last_allocation() : nullptr;
    }
    // Quiescent only: drops every block of every thread's heap.
    void deallocate_all() noexcept
        requires has_deallocate_all<H>
    {
        std::lock_guard g(registry_lock_);
        for (auto& s : slots_) {
            s->remote.store(nullptr, std::memory_order_relaxed);
            s->heap->deallocate_all();
        }
    }
    // Quiescent only: drains every heap's remote list (collect() for all threads).
    void collect_all() noexcept {
        std::lock_guard g(registry_lock_);
        for (auto& s : slots_) drain(*s);
    }
    // Quiescent only: f(H&) for every heap in the registry.
    template <class F>
    void for_each_heap(F&& f) {
        std::lock_guard g(registry_lock_);
        for (auto& s : slots_) f(*s->heap);
    }
    // How many heaps the registry holds (at most the peak number of threads).
    std::size_t heap_count() const {
        std::lock_guard g(registry_lock_);
        return slots_.size();
    }
    // Blocks freed by a thread other than their owner so far.
    std::size_t remote_frees() const {
        std::lock_guard g(registry_lock_);
        std::size_t n = 0;
        for (auto& s : slots_) n += s->remote_frees.load(std::memory_order_relaxed);
        return n;
    }

private:
    // This thread's slot, or nullptr when it has not allocated through this object.
    slot* mine() const noexcept {
        tls_cache& c = cache();
        if (c.last_id == id_) return c.last;
        for (auto& e : c.entries)
            if (e.id == id_) {
                c.last_id = id_;
                c.last = e.s.get();
                return c.last;
            }
        return nullptr;
    }
    slot* mine_or_new() const noexcept {
        if (slot* s = mine()) return s;
        try {
            tls_cache& c = cache();
            std::erase_if(c.entries, [](const tls_entry& e) { return e.s->retired.load(std::memory_order_acquire); });
            c.entries.reserve(c.entries.size() + 1);
            std::shared_ptr<slot> s = adopt_or_create();
            c.entries.push_back({id_, s});
            c.last_id = id_;
            c.last = s.get();
            return c.last;
        } catch (...) {
            return nullptr;
        }
    }
    std::shared_ptr<slot> adopt_or_create() const {
        std::lock_guard g(registry_lock_);
        for (auto& s : slots_) {
            bool expected = true;
            if (s->orphaned.compare_exchange_strong(expected, false, std::memory_order_acq_rel)) return s;
        }
        auto s = std::make_shared<slot>();
        s->heap.emplace();
        slots_.reserve(slots_.size() + 1);
        slots_.push_back(s);
        return s;
    }
    // Owner only: gives every remotely freed block back to the heap.
    static void drain(slot& s) noexcept {
        header* h = s.remote.exchange(nullptr, std::memory_order_acquire);
        while (h) {
            auto* next = reinterpret_cast<header*>(h->link);
            const std::size_t size = static_cast<std::size_t>(h->word >> 8);
            const unsigned code = static_cast<unsigned>(h->word & 0xff);
            const std::size_t pa = code == 0 ? 0 : std::size_t{1} << code;
            const std::size_t hdr = pa > header_bytes ? pa : header_bytes;
            std::byte* user = reinterpret_cast<std::byte*>(h) + header_bytes;
            s.heap->deallocate(user - hdr, request{size + hdr, nullptr, pa});
            h = next;
        }
    }

    const std::uint64_t id_ = next_id();
    mutable std::mutex registry_lock_;
    mutable std::vector<std::shared_ptr<slot>> slots_;
};

} // namespace allotheque::layers
