// The per-thread machinery (detail/thread_registry.hpp, thread_binding.hpp,
// fork_guard.hpp) through both of its users, with the same tests:
// layers::per_thread<H> and a declared malloc (malloc_runtime<D>, called
// directly rather than preloaded). [threads]: run under TSan too.
//
//   - thread churn: blocks left by exited threads are freed by later ones
//     (remote frees into orphans), every block's contents verified, and the
//     registry stays near the peak number of live threads;
//   - a thread_local destroyed at thread exit still frees into its own heap
//     (the exit hand-over runs after thread_local destructors);
//   - a pthread key destructor that runs after the hand-over frees and
//     allocates (it borrows a heap: nothing is tied to a dead thread);
//   - fork while other threads allocate: the child allocates on its main
//     thread and on a new one, and exits.
#include "catch.hpp"

#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <allotheque/allocators/segregated.hpp>
#include <allotheque/layers/per_thread.hpp>
#include <allotheque/malloc/runtime.hpp>
#include <allotheque/malloc/shipped.hpp>

namespace al = allotheque;

namespace {

struct per_thread_front {
    using layer = al::layers::per_thread<al::segregated_heap<>>;
    // Never destroyed: key destructors of exiting threads may use it after main.
    static layer& h() {
        static layer* l = new layer;
        return *l;
    }
    static void* allocate(std::size_t n) { return h().allocate(al::request{n}); }
    static void free(void* p, std::size_t n) { h().deallocate(p, al::request{n}); }
    static std::size_t heaps() { return h().heap_count(); }
    static std::size_t remote_frees() { return h().remote_frees(); }
};

struct test_malloc {
    using heap = al::malloc_declarations::segregated::heap;
    static constexpr const char* name = "test";
    static constexpr bool count_remote_frees = true;   // remote_frees() below
};
static_assert(al::malloc_counts_remote_frees<test_malloc>);
static_assert(!al::malloc_counts_remote_frees<al::malloc_declarations::segregated>);
// Uncounted, a remote list has no count to read (and pays no increment).
template <class L>
concept counts_pushes = requires(const L& l) { l.pushed(); };
static_assert(!counts_pushes<al::detail::remote_list<>> && counts_pushes<al::detail::remote_list<true>>);
static_assert(sizeof(al::detail::remote_list<>) < sizeof(al::detail::remote_list<true>));
struct malloc_front {
    using rt = al::malloc_runtime<test_malloc>;
    static void* allocate(std::size_t n) { return rt::allocate(n, 16); }
    static void free(void* p, std::size_t) { rt::deallocate(p); }
    static std::size_t heaps() { return rt::heap_count(); }
    // malloc_trim: orphans that hold nothing any more are destroyed (and
    // their counts of remote frees with them).
    static void trim_all() { rt::trim_all(); }
    static std::size_t remote_frees() {
        std::size_t n = 0;
        rt::for_each_heap([&](const auto& th) { n += th.remote.pushed(); });
        return n;
    }
};

void fill(void* p, std::size_t n) { std::memset(p, static_cast<int>(n & 0xff), n); }
bool intact(const void* p, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (std::size_t k = 0; k < n; ++k)
        if (b[k] != static_cast<unsigned char>(n & 0xff)) return false;
    return true;
}

// A thread_local whose destructor frees its blocks and allocates once more.
template <class F>
struct tls_holder {
    std::vector<std::pair<void*, std::size_t>> blocks;
    std::atomic<int>* damaged = nullptr;
    ~tls_holder() {
        for (auto [p, n] : blocks) {
            if (!intact(p, n)) ++*damaged;
            F::free(p, n);
        }
        void* late = F::allocate(48);
        fill(late, 48);
        F::free(late, 48);
    }
};

// The value of a key made after the machinery's own: its destructor runs after
// the thread's heaps went back.
struct late_block {
    void* p;
    std::size_t n;
    std::atomic<int>* damaged;
};
template <class F>
void late_key_destructor(void* v) {
    auto* b = static_cast<late_block*>(v);
    if (!intact(b->p, b->n)) ++*b->damaged;
    F::free(b->p, b->n);
    void* again = F::allocate(64);   // borrowed: this thread holds no heap any more
    fill(again, 64);
    if (!intact(again, 64)) ++*b->damaged;
    F::free(again, 64);
    delete b;
}

} // namespace

TEMPLATE_TEST_CASE("thread heaps: churn, late frees into orphans, adoption", "[threads][registry]", per_thread_front,
                   malloc_front) {
    using F = TestType;
    void* warm = F::allocate(32);   // this thread's heap exists before the count
    const std::size_t heaps_before = F::heaps();
    const std::size_t remote_before = F::remote_frees();
    std::vector<std::pair<void*, std::size_t>> left;
    std::mutex m;
    std::atomic<int> damaged{0};
    for (int round = 0; round < 150; ++round) {
        std::vector<std::thread> ts;
        for (int t = 0; t < 3; ++t)
            ts.emplace_back([&, t, round] {
                std::vector<std::pair<void*, std::size_t>> mine;
                {
                    std::lock_guard g(m);
                    mine.swap(left);
                }
                for (auto [p, n] : mine) {
                    if (!intact(p, n)) ++damaged;
                    F::free(p, n);
                }
                for (int i = 0; i < 40; ++i) {
                    const std::size_t n = 16 + static_cast<std::size_t>((round * 7 + t * 13 + i * 29) % 600);
                    void* p = F::allocate(n);
                    fill(p, n);
                    std::lock_guard g(m);
                    left.emplace_back(p, n);
                }
            });
        for (auto& t : ts) t.join();
    }
    for (auto [p, n] : left) {
        if (!intact(p, n)) ++damaged;
        F::free(p, n);
    }
    F::free(warm, 32);
    CHECK(damaged.load() == 0);
    CHECK(F::remote_frees() > remote_before);
    // 3 workers at a time: heaps of exited threads are adopted, not piled up.
    CHECK(F::heaps() <= heaps_before + 3);
}

// More live heaps than a thread's outbox has ways (remote_outbox::ways): every
// thread allocates, then frees blocks of many other threads while all of them
// still live, so batches for owners that share a way post one another early.
// Every block must reach its owner intact, once: per_thread's count is exact
// once the threads have exited (an exit hands the last batches over); the
// malloc destroys orphans that hold nothing, so there every heap must be
// empty after malloc_trim, which it is only if all its blocks came back.
TEMPLATE_TEST_CASE("thread heaps: more live heaps than outbox ways, frees between all of them",
                   "[threads][registry]", per_thread_front, malloc_front) {
    using F = TestType;
    constexpr std::size_t threads = al::detail::remote_outbox::ways + 6, per_thread = 40;
    const std::size_t remote_before = F::remote_frees();
    const std::size_t heaps_before = F::heaps();
    std::vector<std::pair<void*, std::size_t>> blocks(threads * per_thread);
    std::atomic<int> damaged{0};
    std::barrier sync(static_cast<std::ptrdiff_t>(threads));
    std::vector<std::thread> ts;
    for (std::size_t t = 0; t < threads; ++t)
        ts.emplace_back([&, t] {
            for (std::size_t i = 0; i < per_thread; ++i) {
                const std::size_t n = 16 + (t * 31 + i * 17) % 700;
                void* p = F::allocate(n);
                fill(p, n);
                blocks[t * per_thread + i] = {p, n};
            }
            sync.arrive_and_wait();
            // Thread t frees block i of thread (t + 1 + i) % threads: 40 owners each.
            for (std::size_t i = 0; i < per_thread; ++i) {
                auto [p, n] = blocks[((t + 1 + i) % threads) * per_thread + i];
                if (!intact(p, n)) ++damaged;
                F::free(p, n);
            }
            sync.arrive_and_wait();   // every thread is still alive while the others free
        });
    for (auto& t : ts) t.join();
    CHECK(damaged.load() == 0);
    if constexpr (requires { F::trim_all(); }) {
        F::trim_all();
        CHECK(F::heaps() <= heaps_before);
    } else {
        CHECK(F::remote_frees() - remote_before == threads * per_thread);
    }
}

TEMPLATE_TEST_CASE("thread heaps: a thread_local destroyed at thread exit frees into its own heap",
                   "[threads][registry]", per_thread_front, malloc_front) {
    using F = TestType;
    void* warm = F::allocate(32);
    const std::size_t remote_before = F::remote_frees();
    std::atomic<int> damaged{0};
    for (int round = 0; round < 50; ++round)
        std::thread([&] {
            // Made before the thread's first allocation: destroyed after any
            // thread_local the machinery might have had.
            static thread_local tls_holder<F> holder;
            holder.damaged = &damaged;
            for (int i = 0; i < 20; ++i) {
                const std::size_t n = 24 + static_cast<std::size_t>(i * 8);
                void* p = F::allocate(n);
                fill(p, n);
                holder.blocks.emplace_back(p, n);
            }
        }).join();
    F::free(warm, 32);
    CHECK(damaged.load() == 0);
    // Its frees went straight into the thread's heap, none the remote way.
    CHECK(F::remote_frees() == remote_before);
}

TEMPLATE_TEST_CASE("thread heaps: a key destructor after the hand-over frees and allocates", "[threads][registry]",
                   per_thread_front, malloc_front) {
    using F = TestType;
    void* warm = F::allocate(32);   // the machinery's key exists: ours is made after it
    const std::size_t heaps_before = F::heaps();
    pthread_key_t key;
    REQUIRE(pthread_key_create(&key, &late_key_destructor<F>) == 0);
    std::atomic<int> damaged{0};
    for (int round = 0; round < 100; ++round) {
        std::thread([&] {
            void* p = F::allocate(200);
            fill(p, 200);
            pthread_setspecific(key, new late_block{p, 200, &damaged});
        }).join();
    }
    pthread_key_delete(key);
    F::free(warm, 32);
    CHECK(damaged.load() == 0);
    CHECK(F::heaps() <= heaps_before + 1);
}

TEMPLATE_TEST_CASE("thread heaps: fork while other threads allocate", "[threads][registry]", per_thread_front,
                   malloc_front) {
    using F = TestType;
    std::atomic<bool> stop{false};
    std::atomic<int> running{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < 3; ++t)
        ts.emplace_back([&] {
            // No std::vector: the system's malloc (a sanitizer's, say) need
            // not be fork-safe, and only the machinery under test is at issue.
            void* mine[64];
            for (bool first = true; !stop.load(std::memory_order_relaxed); first = false) {
                for (void*& p : mine) p = F::allocate(48);
                for (void* p : mine) F::free(p, 48);
                if (first) ++running;
            }
        });
    // Forks start once every worker is past its start-up (which allocates
    // through the system's malloc).
    while (running.load() != 3) std::this_thread::yield();
    for (int round = 0; round < 20; ++round) {
        const pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            alarm(20);   // a lock left held across fork would hang here
            void* p = F::allocate(100);
            fill(p, 100);
#if !defined(__SANITIZE_THREAD__)   // TSan refuses new threads after a multi-threaded fork
            std::thread([] {
                void* q = F::allocate(300);
                fill(q, 300);
                F::free(q, 300);
            }).join();
#endif
            const bool ok = intact(p, 100);
            F::free(p, 100);
            _exit(ok ? 0 : 3);
        }
        int status = 0;
        REQUIRE(waitpid(pid, &status, 0) == pid);
        INFO("child status " << status << (WIFSIGNALED(status) ? " (signal)" : ""));
        CHECK(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == 0);
    }
    stop.store(true);
    for (auto& t : ts) t.join();
}

TEST_CASE("per_thread: an object destroyed while a thread that used it lives on", "[threads][registry]") {
    using layer = al::layers::per_thread<al::segregated_heap<>>;
    auto* a = new layer;
    std::atomic<int> phase{0};
    std::atomic<int> damaged{0};
    std::thread t([&] {
        void* p = a->allocate(al::request{64});
        fill(p, 64);
        if (!intact(p, 64)) ++damaged;
        a->deallocate(p, al::request{64});
        phase.store(1);
        while (phase.load() != 2) std::this_thread::yield();
        // The object is gone; this thread holds its retired slot until it
        // attaches elsewhere (which unmaps it) or exits.
        layer b;
        for (int i = 0; i < 100; ++i) {
            void* q = b.allocate(al::request{32});
            fill(q, 32);
            if (!intact(q, 32)) ++damaged;
            b.deallocate(q, al::request{32});
        }
    });
    while (phase.load() != 1) std::this_thread::yield();
    delete a;
    phase.store(2);
    t.join();
    CHECK(damaged.load() == 0);
    // And many objects made and destroyed on one thread leave nothing behind.
    for (int i = 0; i < 2000; ++i) {
        layer c;
        void* q = c.allocate(al::request{16});
        c.deallocate(q, al::request{16});
        CHECK(c.heap_count() == 1);
    }
}
