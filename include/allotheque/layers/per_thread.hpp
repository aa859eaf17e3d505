// `per_thread<H>`: one heap of type H per thread (Heap Layers' ThreadHeap,
// mimalloc/snmalloc-style remote frees). A thread's heap is created on its
// first allocation through this object and serves that thread without any lock.
//
// Ownership is an implicit attribute of a span: each thread's heap tags the
// spans it holds with its slot (set_owner_tag), and H::owner_of(p) reads the
// tag back from the page map, so blocks carry no header. Freeing:
//   - on the owning thread: straight back into its heap;
//   - on any other thread: the block is pushed onto the owner's lock-free
//     remote-free list (a Treiber stack threaded through the freed blocks,
//     which then hold the link and the request's size and alignment); the
//     owner drains the whole list with one exchange at its next allocation (or
//     collect()). Every request asks H for at least 16 bytes, the room that
//     record needs.
//
// Lifetime: heaps live in a registry owned by the per_thread object and are
// destroyed with it, never with their thread, so a block may outlive the thread
// that allocated it. When a thread exits, its heap gives its free spans back
// (trim, when H has it) and is marked orphaned (remote frees keep arriving on
// its list); the next thread to start allocating adopts an orphaned heap,
// drains it and reuses its memory, so thread churn does not grow the registry
// beyond the peak number of concurrent threads.
// A thread that allocates or frees while its thread-local objects are being
// destroyed (a thread_local container destroyed after this layer's cache)
// frees as a remote thread would, and allocates by borrowing an orphaned heap
// for the one call: it never reaches a heap another thread may have adopted.
//
// Thread safety: allocate, try_allocate, deallocate, good_size, collect,
// last_allocation, stats (this thread's heap) and remote_frees may be called
// from any thread concurrently; a block may be freed on any thread.
// deallocate_all, collect_all, for_each_heap and the destructor need
// quiescence: no other thread may be using this object. The object must
// outlive all use by threads. H itself needs no thread safety: only one thread
// uses a heap at a time.
// Cost: a thread_local lookup (one compare on the fast path) per call and a
// page-map lookup per free; a remote free is one CAS on the owner's list.
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

#include <allotheque/detail/fail.hpp>
#include <allotheque/detail/remote_list.hpp>
#include <allotheque/detail/throwing_allocate.hpp>
#include <allotheque/layers/heap_concept.hpp>
#include <allotheque/request.hpp>

namespace allotheque::layers {

template <class H>
class per_thread : public detail::throwing_allocate<per_thread<H>> {
    static_assert(heap<H>,
                  "allotheque::layers::per_thread<H>: H does not satisfy allotheque::layers::heap (needs allocate(r), "
                  "try_allocate(r), deallocate(p, r), good_size(n, a) and H::max_alignment)");
    static_assert(has_owner<H>,
                  "allotheque::layers::per_thread<H>: H must say which heap holds a block (static owner_of(p) and "
                  "set_owner_tag(tag)): allotheque::heap and block_heap do, through the page map, and every layer "
                  "forwards them");
    static_assert(std::default_initializable<H>,
                  "allotheque::layers::per_thread<H>: heaps are created lazily, so H must be default-constructible");

    // A block on a remote list carries (request size << 8) | log2(alignment)
    // (0 for natural) in its record's word.
    static constexpr std::size_t min_request = detail::remote_list::record_bytes;

    struct slot {
        std::optional<H> heap;
        detail::remote_list remote;
        std::atomic<bool> orphaned{false};   // no thread uses it; free for adoption
        std::atomic<bool> retired{false};    // the per_thread object is gone
    };
    struct tls_entry {
        std::uint64_t id;
        std::shared_ptr<slot> s;
    };
    struct tls_cache;
    // Trivially destructible, so it stays readable while the thread's other
    // thread_local objects are destroyed, whatever their order.
    struct tls_state {
        std::uint64_t last_id = 0;
        slot* last = nullptr;
        tls_cache* cache = nullptr;
        bool dead = false;   // the cache is gone: this thread no longer has heaps
    };
    static tls_state& tls() noexcept {
        static thread_local constinit tls_state t;
        return t;
    }
    struct tls_cache {
        std::vector<tls_entry> entries;
        ~tls_cache() {
            tls_state& t = tls();
            t.dead = true;
            t.cache = nullptr;
            t.last = nullptr;
            t.last_id = 0;
            for (auto& e : entries)
                if (!e.s->retired.load(std::memory_order_acquire)) orphan(*e.s);
        }
    };
    static tls_cache& cache() {
        static thread_local tls_cache c;
        tls().cache = &c;
        return c;
    }
    static std::uint64_t next_id() noexcept {
        static std::atomic<std::uint64_t> n{0};
        return n.fetch_add(1, std::memory_order_relaxed) + 1;
    }
    static void orphan(slot& s) noexcept {
        if constexpr (has_trim<H>) s.heap->trim();
        s.orphaned.store(true, std::memory_order_release);
    }

    static constexpr bool ok_alignment(std::size_t a) noexcept {
        return (a == 0 || (a & (a - 1)) == 0) && a <= H::max_alignment;
    }
    static constexpr request parent_request(const request& r) noexcept {
        request q = r;
        if (q.size < min_request) q.size = min_request;
        return q;
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
            s->remote.clear();   // those blocks go with the heap
            s->heap.reset();
        }
    }

    std::size_t good_size(std::size_t n, std::size_t a = 0) const noexcept {
        if (!ok_alignment(a) || n > max_size) return 0;
        const std::size_t m = n < min_request ? min_request : n;
        if constexpr (requires { H::good_size(m, a); }) {
            return H::good_size(m, a);   // static in allotheque::heap
        } else {   // a layer: ask this thread's heap (created if need be), or any heap
            if (const slot* s = mine_or_new()) return std::as_const(*s->heap).good_size(m, a);
            std::lock_guard g(registry_lock_);
            return slots_.empty() ? 0 : std::as_const(*slots_.front()->heap).good_size(m, a);
        }
    }

    template <request_like R = request>
    [[nodiscard]] void* try_allocate(const R& r) noexcept {
        if (!ok_alignment(r.alignment) || r.size > max_size) return nullptr;
        R q = r;
        if (q.size < min_request) q.size = min_request;
        if (slot* s = mine_or_new()) {
            if (s->remote.maybe_nonempty()) drain(*s);
            return s->heap->try_allocate(q);
        }
        return borrowed_allocate(q);
    }

    void deallocate(void* p, const request& r) noexcept {
        if (!p) return;
        auto* owner = static_cast<slot*>(const_cast<void*>(H::owner_of(p)));
        const request q = parent_request(r);
        if (owner == mine()) {
            owner->heap->deallocate(p, q);
            return;
        }
        if (!owner) detail::fail("allotheque::layers::per_thread", "deallocate of a pointer no heap holds", p);
        owner->remote.push(p, (static_cast<std::uint64_t>(q.size) << 8) | code_of(q.alignment));
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
    // This thread's heap gives its free pages back (see heap::trim).
    std::size_t trim() noexcept
        requires has_trim<H>
    {
        slot* s = mine();
        if (!s) return 0;
        drain(*s);
        return s->heap->trim();
    }
    // Quiescent only: drops every block of every thread's heap.
    void deallocate_all() noexcept
        requires has_deallocate_all<H>
    {
        std::lock_guard g(registry_lock_);
        for (auto& s : slots_) {
            s->remote.clear();
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
        for (auto& s : slots_) n += s->remote.pushed();
        return n;
    }

private:
    static unsigned code_of(std::size_t a) noexcept { return a == 0 ? 0u : static_cast<unsigned>(std::countr_zero(a)); }

    // This thread's slot, or nullptr when it has not allocated through this
    // object (or its thread-local state is being destroyed).
    slot* mine() const noexcept {
        tls_state& t = tls();
        if (t.last_id == id_) return t.last;
        if (!t.cache) return nullptr;
        for (auto& e : t.cache->entries)
            if (e.id == id_) {
                t.last_id = id_;
                t.last = e.s.get();
                return t.last;
            }
        return nullptr;
    }
    slot* mine_or_new() const noexcept {
        if (slot* s = mine()) return s;
        if (tls().dead) return nullptr;
        try {
            tls_cache& c = cache();
            std::erase_if(c.entries, [](const tls_entry& e) { return e.s->retired.load(std::memory_order_acquire); });
            c.entries.reserve(c.entries.size() + 1);
            std::shared_ptr<slot> s = adopt_or_create();
            c.entries.push_back({id_, s});
            tls_state& t = tls();
            t.last_id = id_;
            t.last = s.get();
            return t.last;
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
        s->heap->set_owner_tag(s.get());
        slots_.reserve(slots_.size() + 1);
        slots_.push_back(s);
        return s;
    }
    // A thread whose thread-local state is gone: one allocation from an
    // orphaned heap taken and given back around it (or a new one, orphaned after).
    void* borrowed_allocate(const request& q) noexcept {
        std::shared_ptr<slot> s;
        try {
            s = adopt_or_create();
        } catch (...) {
            return nullptr;
        }
        drain(*s);
        void* p = s->heap->try_allocate(q);
        s->orphaned.store(true, std::memory_order_release);
        return p;
    }
    // Owner only: gives every remotely freed block back to the heap.
    static void drain(slot& s) noexcept {
        s.remote.drain([&](detail::remote_list::record* rec) noexcept {
            const std::size_t size = static_cast<std::size_t>(rec->word >> 8);
            const unsigned code = static_cast<unsigned>(rec->word & 0xff);
            s.heap->deallocate(rec, request{size, nullptr, code == 0 ? 0 : std::size_t{1} << code});
        });
    }

    const std::uint64_t id_ = next_id();
    mutable std::mutex registry_lock_;
    mutable std::vector<std::shared_ptr<slot>> slots_;
};

} // namespace allotheque::layers
