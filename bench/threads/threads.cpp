// threads_bench: multi-threaded malloc throughput (bench/README.md, "Threads").
//
// One (workload, thread count) per process, for a fixed duration; prints one
// JSON line with allocations + frees per second summed over the threads. The
// program calls only malloc/free and operator new/delete, so the same binary
// runs under every malloc by LD_PRELOAD. It reports which malloc is mapped
// (/proc/self/maps) and, for an allotheque library, the heap that library names
// through its exported allotheque_malloc_heap_name() (<allotheque/malloc_stats.h>).
//
// Workloads (sizes in bytes):
//   server    one shared table of 4096 slots per thread; each thread swaps a
//             fresh block (16-512, one in 64: 513-8192) into a random slot
//             and frees the block it took out, usually another thread's
//             (larson-like)
//   prodcons  the threads form a ring: each allocates batches of 64 blocks
//             (16-512) for its successor and frees the batches its predecessor
//             sent, so at >= 2 threads every free is remote
//   local     each thread replaces random slots of its own 2048-slot working
//             set (16-256); nothing is shared
//   mixed     operator new / sized delete, sizes 8-65536 (70 % <= 128, 20 %
//             <= 1 KiB, 8 % <= 8 KiB, 2 % up to 64 KiB) in a 1024-slot working
//             set per thread; one evicted block in 8 is handed to the next
//             thread, which frees it
//   xmalloc   one producer, the other threads consumers that only free
//             (xmalloc-test-like): thread 0 allocates batches of 64 blocks
//             (16-512) for each consumer in turn; at 1 thread it frees its
//             own
//
// Verification: every block gets a stamp derived from (address, size, owning
// thread) on its header word, its last word and up to three words between; it
// is checked before every free. A mismatch, a null or misaligned block, or
// allocation and free counts that do not balance at the end exit 2 with a
// message on stderr: a broken allocator fails the run instead of scoring well.
//
// Exit codes: 0 success; 1 self-test failure; 2 verification failure;
// 64 bad command line.
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <allotheque/malloc_stats.h>

#include "process_memory.hpp"
#include "spawn.hpp"

extern char** environ;

namespace {

constexpr int exit_self_test = 1;
constexpr int exit_verify = 2;
constexpr int exit_usage = 64;

// ---------------------------------------------------------------------------
// Random numbers: splitmix64, one generator per thread.
// ---------------------------------------------------------------------------

constexpr std::uint64_t mix(std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

struct rng {
    std::uint64_t state;
    std::uint64_t next() { return mix(state += 0x9e3779b97f4a7c15ULL); }
    // Uniform in [0, n), by multiply-shift (no division on the hot path).
    std::uint32_t below(std::uint32_t n) { return std::uint32_t(((next() >> 32) * n) >> 32); }
    std::uint32_t between(std::uint32_t lo, std::uint32_t hi) { return lo + below(hi - lo + 1); }
};

// ---------------------------------------------------------------------------
// Block stamps. The header word holds the size (20 bits), the owning thread
// (12 bits) and 32 bits of a hash of those and the address, so a block that
// moved, was overwritten or handed out twice fails the check, and the checker
// needs no side table to know the size.
// ---------------------------------------------------------------------------

constexpr std::uint32_t min_block = 8;
constexpr std::uint32_t max_block = (1u << 20) - 1;
constexpr std::uint32_t max_threads = (1u << 12) - 1;

struct block_info {
    std::uint32_t size;
    std::uint32_t owner;
};

std::uint64_t header_for(const void* p, std::uint32_t size, std::uint32_t owner) {
    const std::uint64_t low = size | std::uint64_t(owner) << 20;
    return (mix(reinterpret_cast<std::uintptr_t>(p) ^ (low << 32 | low)) & 0xffffffff00000000ULL) | low;
}

std::uint64_t word_at(std::uint64_t header, std::uint32_t offset) {
    return mix(header + offset * 0x9e3779b97f4a7c15ULL);
}

// The offsets stamped besides the header: up to three words between and the
// last word, none overlapping the header or each other (blocks below 16 bytes
// carry the header only). Offsets need not be 8-aligned: words go through memcpy.
template <class F>
void for_each_stamped(std::uint32_t size, F f) {
    if (size < 16) return;
    for (std::uint32_t k = 1; k <= 3; ++k) {
        const std::uint32_t o = (size / 4 * k) & ~7u;
        if (o >= 8 && o + 16 <= size) f(o);
    }
    f(size - 8);
}

void stamp(void* p, std::uint32_t size, std::uint32_t owner) {
    auto* b = static_cast<unsigned char*>(p);
    const std::uint64_t h = header_for(p, size, owner);
    std::memcpy(b, &h, 8);
    for_each_stamped(size, [&](std::uint32_t o) {
        const std::uint64_t w = word_at(h, o);
        std::memcpy(b + o, &w, 8);
    });
}

// False when p does not hold what stamp() wrote at this address. The header is
// checked first, so a corrupted size is never used to read past the block.
bool check(const void* p, block_info& out) {
    const auto* b = static_cast<const unsigned char*>(p);
    std::uint64_t h;
    std::memcpy(&h, b, 8);
    const std::uint32_t size = std::uint32_t(h & max_block), owner = std::uint32_t(h >> 20) & max_threads;
    if (size < min_block || h != header_for(p, size, owner)) return false;
    bool ok = true;
    for_each_stamped(size, [&](std::uint32_t o) {
        std::uint64_t w;
        std::memcpy(&w, b + o, 8);
        ok = ok && w == word_at(h, o);
    });
    out = {size, owner};
    return ok;
}

// The block goes by its address: a pointer argument would let GCC assume
// fail() reads the (uninitialised, freshly allocated) bytes.
[[noreturn]] void fail(const char* what, std::uintptr_t block, std::size_t n) {
    if (n)
        std::fprintf(stderr, "threads_bench: %s (block 0x%zx, %zu bytes)\n", what, std::size_t(block), n);
    else
        std::fprintf(stderr, "threads_bench: %s (block 0x%zx)\n", what, std::size_t(block));
    std::fflush(stderr);
    std::_Exit(exit_verify);
}

// ---------------------------------------------------------------------------
// Allocation through the C or the C++ interface, stamped and checked.
// ---------------------------------------------------------------------------

enum class api { c, cxx };

template <api A>
void* obtain(std::uint32_t n) {
    void* p = A == api::c ? std::malloc(n) : ::operator new(n);
    if (!p) fail("malloc returned null", 0, n);
    // 8, not 16: C allows a smaller alignment for blocks too small to hold a
    // 16-aligned object, and mimalloc uses it (24-byte blocks).
    if (const auto at = reinterpret_cast<std::uintptr_t>(p); at % 8 != 0) fail("misaligned block", at, n);
    return p;
}

template <api A>
void release(void* p, std::uint32_t n) {
    if constexpr (A == api::c) {
        std::free(p);
    } else {
        ::operator delete(p, n);
    }
}

// One thread's view: its id (the owner in stamps), its generator and running
// counts of everything it allocated and freed. Padded: the counts are written
// on every operation.
struct alignas(64) worker {
    std::uint32_t id = 0;
    rng r{0};
    std::uint64_t made = 0, freed = 0, remote = 0;
    // Counts when the timed window opened and when this thread saw it close.
    std::uint64_t made0 = 0, freed0 = 0, remote0 = 0, made1 = 0, freed1 = 0, remote1 = 0;

    template <api A>
    void* make(std::uint32_t n) {
        void* p = obtain<A>(n);
        stamp(p, n, id);
        ++made;
        return p;
    }
    template <api A>
    void drop(void* p) {
        block_info b{};
        if (!check(p, b))
            fail("block content differs from what was written at allocation", reinterpret_cast<std::uintptr_t>(p), 0);
        release<A>(p, b.size);
        ++freed;
        remote += b.owner != id;
    }
    void open_window() { made0 = made, freed0 = freed, remote0 = remote; }
    void close_window() { made1 = made, freed1 = freed, remote1 = remote; }
    std::uint64_t ops() const { return (made1 - made0) + (freed1 - freed0); }
};

// A bounded single-producer single-consumer ring; the payload is written in
// place (claim, fill, publish), so passing blocks allocates nothing. With one
// thread the producer and the consumer are the same thread, which is fine.
template <class T, std::size_t N>
class spsc_ring {
    static_assert((N & (N - 1)) == 0, "N must be a power of two");
    T slot_[N];
    alignas(64) std::atomic<std::uint64_t> head_{0};   // next to consume (consumer writes)
    alignas(64) std::atomic<std::uint64_t> tail_{0};   // next to fill (producer writes)

public:
    // Producer: the slot to fill, or nullptr while the ring is full; then publish().
    T* claim() {
        const std::uint64_t t = tail_.load(std::memory_order_relaxed);
        return t - head_.load(std::memory_order_acquire) < N ? &slot_[t % N] : nullptr;
    }
    void publish() { tail_.store(tail_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }
    // Consumer: the oldest published slot, or nullptr; then pop().
    T* front() {
        const std::uint64_t h = head_.load(std::memory_order_relaxed);
        return h != tail_.load(std::memory_order_acquire) ? &slot_[h % N] : nullptr;
    }
    void pop() { head_.store(head_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }
};

// ---------------------------------------------------------------------------
// Workloads. Each has a shared part (constructed with the thread count) and a
// per-thread part; setup() fills the working set before the timed window,
// step() is a short burst of work between two looks at the stop flag, and
// teardown() frees everything once no thread produces any more.
// ---------------------------------------------------------------------------

constexpr std::uint32_t burst = 16;

struct server {
    static constexpr std::uint32_t slots_per_thread = 4096;
    std::uint32_t slots;
    std::unique_ptr<std::atomic<void*>[]> table;

    explicit server(std::uint32_t t) : slots(slots_per_thread * t), table(new std::atomic<void*>[slots]) {}
    static std::uint32_t size(rng& r) { return r.below(64) == 0 ? r.between(513, 8192) : r.between(16, 512); }

    struct local {};
    local setup(worker& w) {
        for (std::uint32_t i = w.id * slots_per_thread; i < (w.id + 1) * slots_per_thread; ++i)
            table[i].store(w.make<api::c>(size(w.r)), std::memory_order_relaxed);
        return {};
    }
    void step(worker& w, local&) {
        for (std::uint32_t k = 0; k < burst; ++k) {
            void* fresh = w.make<api::c>(size(w.r));
            w.drop<api::c>(table[w.r.below(slots)].exchange(fresh, std::memory_order_acq_rel));
        }
    }
    void teardown(worker& w, local&) {
        for (std::uint32_t i = w.id * slots_per_thread; i < (w.id + 1) * slots_per_thread; ++i)
            w.drop<api::c>(table[i].load(std::memory_order_relaxed));
    }
};

// Batches of 64 blocks (16-512 B) handed to other threads through bounded
// lock-free queues of 8 batches, one queue per receiving thread.
struct batch_mail {
    static constexpr std::uint32_t batch_blocks = 64;
    struct batch {
        void* block[batch_blocks];
    };
    using ring = spsc_ring<batch, 8>;
    std::uint32_t threads;
    std::unique_ptr<ring[]> inbox;   // inbox[i]: batches for thread i

    explicit batch_mail(std::uint32_t t) : threads(t), inbox(new ring[t]) {}

    // Frees every batch waiting for w; how many there were.
    std::uint32_t consume(worker& w) {
        std::uint32_t n = 0;
        for (ring& in = inbox[w.id]; batch* b = in.front(); in.pop(), ++n)
            for (void* p : b->block) w.drop<api::c>(p);
        return n;
    }
    // A batch for thread `to`, or false while its queue is full.
    bool send(worker& w, std::uint32_t to) {
        batch* b = inbox[to].claim();
        if (!b) return false;
        for (void*& p : b->block) p = w.make<api::c>(w.r.between(16, 512));
        inbox[to].publish();
        return true;
    }
    // Nothing to do: let the partner run. Yield first; once that has not
    // helped for a while, sleep, so the core goes idle and the scheduler can
    // move a waiting partner onto it (a yielding thread keeps its core busy).
    static void wait(std::uint32_t& idle) {
        ++idle < 64 ? std::this_thread::yield() : std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
};

// Each thread sends to its successor in a ring and frees what its predecessor sent.
struct prodcons : batch_mail {
    using batch_mail::batch_mail;
    // Rounds in a row with nothing to consume and no room to produce.
    struct local {
        std::uint32_t idle = 0;
    };
    local setup(worker&) { return {}; }
    void step(worker& w, local& l) {
        const std::uint32_t consumed = consume(w);
        if (send(w, (w.id + 1) % threads))
            l.idle = 0;
        else if (consumed == 0)
            wait(l.idle);   // the successor is behind and nothing came in
    }
    void teardown(worker& w, local&) { consume(w); }
};

// Thread 0 sends to the others in turn, which only free (at 1 thread, to itself).
struct xmalloc : batch_mail {
    using batch_mail::batch_mail;
    struct local {
        std::uint32_t next = 0;   // the producer's next consumer
        std::uint32_t idle = 0;
    };
    local setup(worker&) { return {}; }
    bool produce(worker& w, local& l) {
        for (std::uint32_t tries = 0; tries < threads; ++tries)   // a full queue is passed over for now
            if (send(w, threads == 1 ? 0 : 1 + l.next++ % (threads - 1))) return true;
        return false;
    }
    void step(worker& w, local& l) {
        bool busy = w.id == 0 && produce(w, l);
        if (w.id != 0 || threads == 1) busy = consume(w) > 0 || busy;
        busy ? void(l.idle = 0) : wait(l.idle);
    }
    void teardown(worker& w, local&) { consume(w); }
};

// A thread's own working set, allocated through interface A.
template <api A>
struct block_set {
    std::vector<void*> block;

    template <class Size>
    block_set(worker& w, std::uint32_t n, Size size) : block(n) {
        for (void*& p : block) p = w.make<A>(size(w.r));
    }
    void*& any(rng& r) { return block[r.below(std::uint32_t(block.size()))]; }
    void free_all(worker& w) {
        for (void* p : block) w.drop<A>(p);
    }
};

struct local_churn {
    static constexpr std::uint32_t working_set = 2048;
    explicit local_churn(std::uint32_t) {}
    static std::uint32_t size(rng& r) { return r.between(16, 256); }

    using local = block_set<api::c>;
    local setup(worker& w) { return local(w, working_set, size); }
    void step(worker& w, local& l) {
        for (std::uint32_t k = 0; k < burst; ++k) {
            void*& p = l.any(w.r);
            w.drop<api::c>(p);
            p = w.make<api::c>(size(w.r));
        }
    }
    void teardown(worker& w, local& l) { l.free_all(w); }
};

struct mixed {
    static constexpr std::uint32_t working_set = 1024;
    static constexpr std::uint32_t handoff_one_in = 8;
    using mailbox = spsc_ring<void*, 1024>;
    std::uint32_t threads;
    std::unique_ptr<mailbox[]> inbox;   // inbox[i]: blocks from thread i-1, freed by thread i

    explicit mixed(std::uint32_t t) : threads(t), inbox(new mailbox[t]) {}
    static std::uint32_t size(rng& r) {
        const std::uint32_t c = r.below(100);
        return c < 70 ? r.between(8, 128) : c < 90 ? r.between(129, 1024) : c < 98 ? r.between(1025, 8192)
                                                                                   : r.between(8193, 65536);
    }

    using local = block_set<api::cxx>;
    local setup(worker& w) { return local(w, working_set, size); }
    void consume(worker& w) {
        for (mailbox& in = inbox[w.id]; void** p = in.front(); in.pop()) w.drop<api::cxx>(*p);
    }
    void step(worker& w, local& l) {
        consume(w);
        mailbox& out = inbox[(w.id + 1) % threads];
        for (std::uint32_t k = 0; k < burst; ++k) {
            void*& slot = l.any(w.r);
            void* old = slot;
            slot = w.make<api::cxx>(size(w.r));
            void** to = w.r.below(handoff_one_in) == 0 ? out.claim() : nullptr;
            if (to) {
                *to = old;
                out.publish();
            } else {
                w.drop<api::cxx>(old);
            }
        }
    }
    void teardown(worker& w, local& l) {
        consume(w);
        l.free_all(w);
    }
};

// ---------------------------------------------------------------------------
// One timed run.
// ---------------------------------------------------------------------------

struct result {
    double seconds = 0, cpu_seconds = 0;
    std::uint64_t allocs = 0, frees = 0, remote_frees = 0, ops_min = 0, ops_max = 0;
    std::uint64_t blocks = 0;   // every block allocated and checked, set-up and teardown included
};

// CPU time of all threads: with the wall time it tells whether the run had
// its cores (another load on the machine, or threads asleep on a lock).
double process_cpu_seconds() {
    timespec ts{};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

template <class W>
result run_workload(std::uint32_t threads, double seconds, std::uint64_t seed) {
    W shared(threads);
    std::vector<worker> workers(threads);
    for (std::uint32_t i = 0; i < threads; ++i) workers[i].id = i, workers[i].r.state = mix(seed + i);
    std::barrier start(std::ptrdiff_t(threads) + 1);   // workers and this thread: the window opens
    std::barrier stopped{std::ptrdiff_t(threads)};     // nobody produces any more: safe to drain
    alignas(64) std::atomic<bool> stop{false};

    std::vector<std::thread> pool;
    pool.reserve(threads);
    for (std::uint32_t i = 0; i < threads; ++i)
        pool.emplace_back([&, i] {
            worker& w = workers[i];
            auto l = shared.setup(w);
            start.arrive_and_wait();
            w.open_window();
            while (!stop.load(std::memory_order_relaxed)) shared.step(w, l);
            w.close_window();
            stopped.arrive_and_wait();
            shared.teardown(w, l);
        });
    start.arrive_and_wait();
    const auto t0 = std::chrono::steady_clock::now();
    const double cpu0 = process_cpu_seconds();
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    stop.store(true, std::memory_order_relaxed);
    const auto t1 = std::chrono::steady_clock::now();
    const double cpu1 = process_cpu_seconds();
    for (auto& t : pool) t.join();

    result r;
    r.seconds = std::chrono::duration<double>(t1 - t0).count();
    r.cpu_seconds = cpu1 - cpu0;
    r.ops_min = ~std::uint64_t(0);
    std::uint64_t made = 0, freed = 0;
    for (const worker& w : workers) {
        r.allocs += w.made1 - w.made0;
        r.frees += w.freed1 - w.freed0;
        r.remote_frees += w.remote1 - w.remote0;
        r.ops_min = std::min(r.ops_min, w.ops());
        r.ops_max = std::max(r.ops_max, w.ops());
        made += w.made;
        freed += w.freed;
    }
    if (made != freed) {
        std::fprintf(stderr, "threads_bench: %llu allocations but %llu frees after teardown\n",
                     (unsigned long long)made, (unsigned long long)freed);
        std::_Exit(exit_verify);
    }
    r.blocks = made;
    return r;
}

struct workload_entry {
    const char* name;
    result (*run)(std::uint32_t, double, std::uint64_t);
};
constexpr workload_entry workloads[] = {
    {"server", run_workload<server>},
    {"prodcons", run_workload<prodcons>},
    {"local", run_workload<local_churn>},
    {"mixed", run_workload<mixed>},
    {"xmalloc", run_workload<xmalloc>},
};

const workload_entry* find_workload(std::string_view name) {
    for (const auto& w : workloads)
        if (name == w.name) return &w;
    return nullptr;
}

// The heap an allotheque malloc library names, or nullptr for any other malloc
// (the weak declaration of <allotheque/malloc_stats.h> is null without one).
const char* allotheque_heap() { return allotheque_malloc_heap_name ? allotheque_malloc_heap_name() : nullptr; }

std::string json_string_or_null(const char* s) { return s ? "\"" + std::string(s) + "\"" : "null"; }

std::string identity_fields() {
    return "\"malloc_library\": \"" + std::string(allotheque::tools::malloc_library()) +
           "\", \"allotheque_heap\": " + json_string_or_null(allotheque_heap());
}

void print_result(const char* workload, std::uint32_t threads, double requested, const result& r) {
    const std::uint64_t ops = r.allocs + r.frees;
    std::printf("{\"workload\": \"%s\", \"threads\": %u, \"seconds_requested\": %.3f, \"seconds\": %.6f, "
                "\"cpu_seconds\": %.6f, \"ops\": %llu, \"ops_per_second\": %.1f, \"allocs\": %llu, "
                "\"frees\": %llu, \"remote_frees\": %llu, \"remote_free_fraction\": %.4f, "
                "\"thread_ops_min\": %llu, \"thread_ops_max\": %llu, \"blocks_checked\": %llu, "
                "\"peak_rss_bytes\": %zu, \"nproc\": %u, %s}\n",
                workload, threads, requested, r.seconds, r.cpu_seconds, (unsigned long long)ops,
                double(ops) / r.seconds, (unsigned long long)r.allocs, (unsigned long long)r.frees,
                (unsigned long long)r.remote_frees, r.frees ? double(r.remote_frees) / double(r.frees) : 0.0,
                (unsigned long long)r.ops_min, (unsigned long long)r.ops_max, (unsigned long long)r.blocks,
                allotheque::tools::proc_status_bytes("VmHWM"), std::thread::hardware_concurrency(),
                identity_fields().c_str());
    std::fflush(stdout);
}

// ---------------------------------------------------------------------------
// --self-test: the stamp catches what it must, and every workload runs, balances
// and frees remotely exactly where its design says.
// ---------------------------------------------------------------------------

int self_test() {
    int passed = 0, failed = 0;
    auto expect = [&](bool ok, const std::string& what) {
        ok ? ++passed : ++failed;
        if (!ok) std::fprintf(stderr, "self-test FAILED: %s\n", what.c_str());
    };

    // Stamps: intact blocks pass; flipping any stamped byte, moving the block
    // or changing the size field fails.
    for (std::uint32_t size : {8u, 9u, 15u, 16u, 17u, 24u, 31u, 40u, 63u, 100u, 513u, 4097u, 65536u}) {
        std::vector<unsigned char> buf(size + 16), copy(size + 16);
        void* p = buf.data();
        stamp(p, size, 7);
        block_info b{};
        expect(check(p, b) && b.size == size && b.owner == 7, "intact block of " + std::to_string(size));
        std::vector<std::uint32_t> offsets{0, 7};
        for_each_stamped(size, [&](std::uint32_t o) { offsets.insert(offsets.end(), {o, o + 7}); });
        for (std::uint32_t o : offsets) {
            buf[o] ^= 0x10;
            expect(!check(p, b), "flipped byte " + std::to_string(o) + " of " + std::to_string(size));
            buf[o] ^= 0x10;
        }
        std::memcpy(copy.data() + 8, buf.data(), size);
        expect(!check(copy.data() + 8, b), "moved block of " + std::to_string(size));
        std::uint64_t h;
        std::memcpy(&h, p, 8);
        h ^= 1;   // size off by one, hash kept
        std::memcpy(p, &h, 8);
        expect(!check(p, b), "size field changed, " + std::to_string(size));
    }

    // Workloads: short runs at 1, 2 and 3 threads (3: a ring of odd length).
    for (const auto& w : workloads) {
        for (std::uint32_t t : {1u, 2u, 3u}) {
            const result r = w.run(t, 0.03, 42);
            const std::string what = std::string(w.name) + " at " + std::to_string(t) + " threads";
            expect(r.allocs > 0 && r.frees > 0 && r.ops_min > 0, what + ": every thread did work");
            expect(r.blocks >= r.allocs, what + ": counts");
            const std::string_view name = w.name;
            if (name == "local" || t == 1) expect(r.remote_frees == 0, what + ": no remote free");
            if ((name == "prodcons" || name == "xmalloc") && t > 1)
                expect(r.remote_frees == r.frees, what + ": every free remote");
            if ((name == "server" || name == "mixed") && t > 1) expect(r.remote_frees > 0, what + ": remote frees");
        }
    }
    // The command line: every bad input exits 64 with a message, and a block
    // found corrupt exits 2 (--test-corruption frees one it has overwritten).
    const std::vector<std::vector<std::string>> bad = {
        {},
        {"--workload", "nope", "--threads", "1"},
        {"--workload", "server"},
        {"--workload", "server", "--threads", "0"},
        {"--workload", "server", "--threads", std::to_string(max_threads + 1)},
        {"--workload", "server", "--threads", "-1"},
        {"--workload", "server", "--threads", "2x"},
        {"--workload", "server", "--threads", "99999999999999999999999"},
        {"--workload", "server", "--threads", "1", "--seconds", "0"},
        {"--workload", "server", "--threads", "1", "--seconds", "abc"},
        {"--workload", "server", "--threads", "1", "--seconds", "nan"},
        {"--workload", "server", "--threads"},
        {"--bogus"},
    };
    for (const auto& args : bad) {
        std::vector<std::string> argv{"/proc/self/exe"};
        argv.insert(argv.end(), args.begin(), args.end());
        const auto r = allotheque::tools::spawn_capture(argv, environ);
        std::string line;
        for (const auto& a : args) line += " " + a;
        expect(r.status == exit_usage && r.out.find("threads_bench: ") == 0,
               "bad usage exits " + std::to_string(exit_usage) + ":" + line);
    }
    const auto r = allotheque::tools::spawn_capture({"/proc/self/exe", "--test-corruption"}, environ);
    expect(r.status == exit_verify && r.out.find("block content differs") != std::string::npos,
           "a corrupt block exits " + std::to_string(exit_verify));

    std::printf("self-test: %d passed, %d failed\n", passed, failed);
    return failed ? exit_self_test : 0;
}

void usage(std::FILE* to) {
    std::fprintf(to,
                 "usage: threads_bench --workload NAME --threads N [--seconds S] [--seed N]\n"
                 "       threads_bench --list | --identify | --self-test | --test-corruption | --help\n"
                 "workloads: server prodcons local mixed xmalloc (bench/README.md, \"Threads\")\n"
                 "  --threads N   1..%u worker threads\n"
                 "  --seconds S   timed window, 0.001..3600 (default 0.25)\n"
                 "  --identify    print the active malloc as JSON and exit\n"
                 "  --self-test   check the stamps, the command line and every workload briefly\n"
                 "  --test-corruption  free a block after overwriting it: must exit %d\n",
                 max_threads, exit_verify);
}

[[noreturn]] void bad_usage(const std::string& why) {
    std::fprintf(stderr, "threads_bench: %s\n", why.c_str());
    usage(stderr);
    std::exit(exit_usage);
}

// The value of a numeric flag, or a bad_usage: the whole text must be the number.
std::uint64_t whole_arg(const char* flag, const char* text) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(text, &end, 10);
    if (!*text || *end || *text == '-' || *text == '+' || errno)
        bad_usage(std::string(flag) + ": not a whole number: '" + text + "'");
    return v;
}

double real_arg(const char* flag, const char* text) {
    char* end = nullptr;
    const double v = std::strtod(text, &end);
    if (!*text || *end) bad_usage(std::string(flag) + ": not a number: '" + text + "'");
    return v;
}

} // namespace

int main(int argc, char** argv) {
    const workload_entry* workload = nullptr;
    std::uint64_t threads = 0, seed = 1;
    double seconds = 0.25;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        auto value = [&]() -> const char* {
            if (i + 1 >= argc) bad_usage(std::string(a) + " needs a value");
            return argv[++i];
        };
        if (a == "--help" || a == "-h") {
            usage(stdout);
            return 0;
        } else if (a == "--list") {
            for (const auto& w : workloads) std::printf("%s\n", w.name);
            return 0;
        } else if (a == "--identify") {
            std::printf("{%s}\n", identity_fields().c_str());
            return 0;
        } else if (a == "--self-test") {
            return self_test();
        } else if (a == "--test-corruption") {
            // For the self-test: the path a broken allocator takes.
            worker w;
            void* p = w.make<api::c>(64);
            static_cast<unsigned char*>(p)[33] ^= 1;   // inside the stamped word at 32
            w.drop<api::c>(p);
            return 0;
        } else if (a == "--workload") {
            const char* v = value();
            workload = find_workload(v);
            if (!workload) bad_usage(std::string("unknown workload '") + v + "'");
        } else if (a == "--threads") {
            threads = whole_arg("--threads", value());
        } else if (a == "--seconds") {
            seconds = real_arg("--seconds", value());
        } else if (a == "--seed") {
            seed = whole_arg("--seed", value());
        } else {
            bad_usage("unknown argument '" + std::string(a) + "'");
        }
    }
    if (!workload) bad_usage("--workload is required");
    if (!(threads >= 1 && threads <= max_threads)) bad_usage("--threads must be 1.." + std::to_string(max_threads));
    if (!(seconds >= 0.001 && seconds <= 3600)) bad_usage("--seconds must be 0.001..3600");
    const result r = workload->run(std::uint32_t(threads), seconds, seed);
    print_result(workload->name, std::uint32_t(threads), seconds, r);
    return 0;
}
