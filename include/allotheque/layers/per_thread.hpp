// `per_thread<H>`: one heap of type H per thread (Heap Layers' ThreadHeap,
// mimalloc/snmalloc-style remote frees). A thread's heap is created on its
// first allocation through this object and serves that thread without any lock.
//
// The machinery is the malloc replacement's (detail/thread_registry.hpp):
// ownership is an implicit attribute of a span (each heap tags its spans with
// its slot, and H::owner_of(p) reads the tag back from the page map, so blocks
// carry no header). Freeing:
//   - on the owning thread: straight back into its heap;
//   - on any other thread: the block (which then holds the request's size
//     and alignment) goes into the batch the freeing thread fills for its
//     owner, or alone onto the owner's lock-free remote-free list when the
//     thread holds no heap of this object (detail/remote_outbox.hpp); the
//     owner drains the whole list with one exchange at its next allocation
//     that its heap cannot serve from the chunks it already holds (or
//     collect()). Every request asks H for at least 16 bytes, the room that
//     record needs.
//
// Lifetime: heaps live in the object's registry and are destroyed with it,
// never with their thread, so a block may outlive the thread that allocated
// it. When a thread exits (after its thread_local objects are destroyed, so
// those may still use their heap), its heap trims (when H has trim) and is
// orphaned; the next new thread adopts it, so thread churn does not grow the
// registry beyond the peak number of concurrent threads. A thread that
// allocates after that point (another pthread key's destructor) borrows an
// orphan for the one call. Fork: only the forking thread's heaps are used in
// the child.
//
// Thread safety: allocate, try_allocate, deallocate, good_size, collect,
// last_allocation, stats (this thread's heap) and remote_frees may be called
// from any thread concurrently; a block may be freed on any thread.
// deallocate_all, collect_all, for_each_heap and the destructor need
// quiescence: no other thread may be using this object. The object must
// outlive all use by threads (threads may exit after it is gone). H itself
// needs no thread safety: only one thread uses a heap at a time.
// Cost: a thread_local compare on the fast path per call and a page-map
// lookup per free; a remote free is a store into a batch, one CAS per 62
// blocks (one per block from a thread without a heap here). Set-up calls
// no malloc (slots are mmap'd).
// Over an allotheque::heap the fast paths are the malloc's, inline: the
// cached slot and H::try_allocate_cached; a free whose block is the thread's
// own. Everything else is one call.
#pragma once
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>

#include <allotheque/backend/span.hpp>
#include <allotheque/detail/fail.hpp>
#include <allotheque/detail/thread_registry.hpp>
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

    // A block on a remote list carries (request size << 8) | (1 +
    // log2(alignment)) (0 for natural) in its record's word.
    static constexpr std::size_t min_request = detail::remote_list<>::record_bytes;

    struct policy;
    using registry_type = detail::thread_registry<H, policy, true>;   // counted: remote_frees()
    using slot = typename registry_type::slot;

    // The last (object, slot) this thread used: one compare on the fast path.
    struct tls_cache {
        std::uint64_t id = 0;
        slot* s = nullptr;
    };
    static tls_cache& tls() noexcept {
        static constinit thread_local tls_cache t;
        return t;
    }

    struct policy {
        // Orphans are kept (a per_thread object's registry stays at the peak
        // number of threads, and goes with the object).
        static constexpr std::size_t kept_orphans = std::numeric_limits<std::size_t>::max();
        static void give_back(H& h, detail::remote_record* rec) noexcept {
            const std::size_t size = static_cast<std::size_t>(rec->word >> 8);
            const unsigned code = static_cast<unsigned>(rec->word & 0xff);
            h.deallocate(rec, request{size, nullptr, code == 0 ? 0 : std::size_t{1} << (code - 1)});
        }
        static void prepare(H&) noexcept {}
        static void attached(slot&) noexcept {}
        static void detached(slot& s) noexcept {
            if (tls().s == &s) tls() = {};
        }
        static std::size_t trim(H& h) noexcept {
            if constexpr (has_trim<H>)
                return h.trim();
            else
                return 0;
        }
        static void release_pages(H& h) noexcept {
            if constexpr (requires { h.release_free_pages(); }) h.release_free_pages();
        }
        static bool holds_nothing(const H&) noexcept { return false; }
    };

    static constexpr bool ok_alignment(std::size_t a) noexcept {
        return (a == 0 || (a & (a - 1)) == 0) && a <= H::max_alignment;
    }
    // What H is asked for: at least the room a remote-free record needs.
    template <request_like R>
    static constexpr R parent_request(const R& r) noexcept {
        R q = r;
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
        // Blocks freed by other threads and still on their way (a batch, a
        // remote list) are given back first: a checking parent destroyed with
        // them would report them as leaks, though the program freed them.
        collect_all();
        if (tls().id == id_) tls() = {};
        registry_.retire();
    }

    std::size_t good_size(std::size_t n, std::size_t a = 0) const noexcept {
        if (!ok_alignment(a) || n > max_size) return 0;
        const std::size_t m = n < min_request ? min_request : n;
        if constexpr (requires { H::good_size(m, a); }) {
            return H::good_size(m, a);   // static in allotheque::heap
        } else {   // a layer: ask this thread's heap (created if need be), or any heap
            if (const slot* s = mine_or_new()) return std::as_const(s->heap).good_size(m, a);
            std::size_t g = 0;
            registry_.for_each([&](slot& s) noexcept {
                if (g == 0) g = std::as_const(s.heap).good_size(m, a);
            });
            return g;
        }
    }

    // The fast path is the malloc's: the thread's cached slot and a chunk the
    // heap already holds (H::try_allocate_cached, which calls nothing),
    // inline; everything else one call, which takes the remote frees back
    // first (after the heap's search, where that is apart from its pop, as
    // the malloc does).
    template <request_like R = request>
    [[nodiscard, gnu::always_inline]] void* try_allocate(const R& r) noexcept {
        if constexpr (requires(H& h) { h.try_allocate_cached(r); }) {
            const tls_cache& t = tls();
            if (t.id == id_) [[likely]] {
                if (void* p = t.s->heap.try_allocate_cached(parent_request(r))) [[likely]]
                    return p;
                if constexpr (requires { requires H::searches_apart; }) return try_allocate_searched(r);
            }
        }
        return try_allocate_slow(r);
    }

    // The owner's free inline (the page map's owner tag, one compare), a
    // remote free or a bad pointer one call. Over a heap<> it is the malloc's
    // free: the chunk's span says whose it is and its size, so the request's
    // size is not classified again (large blocks take the call).
    [[gnu::always_inline]] void deallocate(void* p, const request& r) noexcept {
        const tls_cache& t = tls();
        if constexpr (requires(backend::span& sp) {
                          { H::span_at(p) } -> std::same_as<backend::span*>;
                          t.s->heap.deallocate_chunk(p, sp);
                      }) {
            if (t.id == id_) [[likely]] {
                backend::span* sp = H::span_at(p);   // null p: the empty span, whose owner is null
                if (sp->owner == t.s && sp->held_chunk_start(p)) [[likely]] {
                    t.s->heap.deallocate_chunk(p, *sp);
                    return;
                }
            }
        } else {
            if (t.id == id_ && H::owner_of(p) == t.s) [[likely]] {   // null p: no owner
                t.s->heap.deallocate(p, parent_request(r));
                return;
            }
        }
        deallocate_slow(p, r);
    }

private:
    template <request_like R>
    [[gnu::noinline]] void* try_allocate_searched(const R& r) noexcept {
        if (void* p = tls().s->heap.try_allocate_searched(parent_request(r))) return p;
        return try_allocate_slow(r);
    }
    template <request_like R>
    [[gnu::noinline]] void* try_allocate_slow(const R& r) noexcept {
        if (!ok_alignment(r.alignment) || r.size > max_size) return nullptr;
        const R q = parent_request(r);
        if (slot* s = mine_or_new()) {
            registry_type::drain_pending(s);
            return s->heap.try_allocate(q);
        }
        return registry_.borrow([&](slot& s) noexcept { return s.heap.try_allocate(q); });
    }

    [[gnu::noinline]] void deallocate_slow(void* p, const request& r) noexcept {
        if (!p) return;
        auto* owner = static_cast<slot*>(const_cast<void*>(H::owner_of(p)));
        const request q = parent_request(r);
        if (owner && owner == mine()) {
            owner->heap.deallocate(p, q);
            return;
        }
        if (!owner) detail::fail("allotheque::layers::per_thread", "deallocate of a pointer no heap holds", p);
        const std::uint64_t word = (static_cast<std::uint64_t>(q.size) << 8) | code_of(q.alignment);
        // Batched only within this object's registry (another per_thread
        // object's may go first, and the batch's memory with it).
        slot* from = mine();
        if (from && from->registry != owner->registry) from = nullptr;
        registry_type::hand_over(from, owner, detail::remote_list<>::make_record(p, word), q.size);
    }

public:
    // Takes back the blocks other threads freed into this thread's heap now
    // instead of at the next allocation its heap cannot serve.
    void collect() noexcept {
        if (slot* s = mine()) registry_type::settle(s);
    }

    // This thread's heap's statistics (value-initialised when it has none yet).
    auto stats() const noexcept
        requires has_stats<H>
    {
        using result = decltype(std::declval<const H&>().stats());
        const slot* s = mine();
        return s ? s->heap.stats() : result{};
    }
    const void* last_allocation() const noexcept
        requires has_last_allocation<H>
    {
        const slot* s = mine();
        return s ? s->heap.last_allocation() : nullptr;
    }
    // This thread's heap gives its free pages back (see heap::trim).
    std::size_t trim() noexcept
        requires has_trim<H>
    {
        slot* s = mine();
        if (!s) return 0;
        registry_type::settle(s);
        return s->heap.trim();
    }
    // Quiescent only: drops every block of every thread's heap.
    void deallocate_all() noexcept
        requires has_deallocate_all<H>
    {
        registry_.for_each([](slot& s) noexcept {
            registry_type::drop_remote(&s);
            s.heap.deallocate_all();
        });
    }
    // Quiescent only: drains every heap's remote list (collect() for all threads).
    void collect_all() noexcept {
        registry_.for_each([](slot& s) noexcept { registry_type::flush(&s); });
        registry_.for_each([](slot& s) noexcept { registry_type::drain(&s); });
    }
    // Quiescent only: f(H&) for every heap in the registry.
    template <class F>
    void for_each_heap(F&& f) {
        registry_.for_each([&](slot& s) { f(s.heap); });
    }
    // How many heaps the registry holds (at most the peak number of threads).
    std::size_t heap_count() const {
        std::size_t n = 0;
        registry_.for_each([&](slot&) noexcept { ++n; });
        return n;
    }
    // Blocks freed by a thread other than their owner so far.
    std::size_t remote_frees() const {
        std::size_t n = 0;
        registry_.for_each([&](slot& s) noexcept { n += s.remote.pushed(); });
        return n;
    }

private:
    // 1 + log2(a), so that alignment 1 is told from natural (a checking
    // parent compares the two and took one for the other).
    static unsigned code_of(std::size_t a) noexcept {
        return a == 0 ? 0u : 1u + static_cast<unsigned>(std::countr_zero(a));
    }

    // This thread's slot, or nullptr when it has not allocated through this
    // object (or has exited).
    slot* mine() const noexcept {
        tls_cache& t = tls();
        if (t.id == id_) return t.s;
        slot* s = registry_.held();
        if (s) t = {id_, s};
        return s;
    }
    slot* mine_or_new() const noexcept {
        if (slot* s = mine()) return s;
        slot* s = registry_.attach();
        if (s) tls() = {id_, s};
        return s;
    }
    mutable registry_type registry_;
    const std::uint64_t id_ = registry_.id();
};

} // namespace allotheque::layers
