// Stress program for liballotheque_malloc under LD_PRELOAD ([threads]).
//
// 1. Checks that the preload is active: malloc resolves into a library whose
//    path contains "allotheque_malloc", and the library's own entry point
//    allotheque_malloc_heap_name() is reachable.
// 2. API checks: calloc zeroes and rejects overflow, posix_memalign returns
//    EINVAL for bad alignments, alignments 16..1 MiB are honoured,
//    malloc_usable_size >= request, realloc in place when the block suffices,
//    reallocarray overflow, operator new/delete forms, nothrow new.
// 3. THREADS threads (16, or argv[2]; oversubscribed on small machines on
//    purpose) share OPS random operations (malloc, calloc, realloc,
//    posix_memalign, aligned new, free) with content verification; a quarter of
//    the frees are of blocks another thread allocated (handed over through a
//    shared mailbox).
// 4. Fork safety: while the workers run, the main thread forks repeatedly; each
//    child allocates and frees (a held heap lock would hang it: alarm(20)).
// Prints "OK <heap name>" and exits 0 on success.
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <new>
#include <string>
#include <thread>
#include <vector>

namespace {

std::atomic<int> failures{0};

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "mt_stress: check failed at line %d: %s\n", __LINE__, #cond); \
            failures.fetch_add(1);                                                    \
        }                                                                             \
    } while (0)

struct rng {
    std::uint64_t s;
    std::uint64_t next() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        return s;
    }
    std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
};

// A block: its size and a seed; bytes are a function of (seed, index).
struct block {
    unsigned char* p = nullptr;
    std::size_t n = 0;
    unsigned char seed = 0;
    int kind = 0;   // 0: malloc family, 1: operator new (aligned)
    std::size_t align = 0;
};

void fill(const block& b) {
    for (std::size_t i = 0; i < b.n; ++i) b.p[i] = static_cast<unsigned char>(b.seed + i * 7);
}
bool verify(const block& b, std::size_t upto) {
    for (std::size_t i = 0; i < upto; ++i)
        if (b.p[i] != static_cast<unsigned char>(b.seed + i * 7)) return false;
    return true;
}
void release(block& b) {
    if (!b.p) return;
    if (b.kind == 1)
        ::operator delete(b.p, std::align_val_t{b.align});
    else
        free(b.p);
    b.p = nullptr;
}

std::size_t random_size(rng& r) {
    const std::size_t k = r.below(100);
    if (k < 70) return r.below(128);
    if (k < 93) return r.below(2048);
    if (k < 99) return r.below(32768);
    return r.below(300000);
}

constexpr std::size_t mailbox_slots = 1024;
std::atomic<block*> mailbox[mailbox_slots];

void worker(int id, long ops) {
    rng r{0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(id + 1)};
    std::vector<block> live(2000);
    for (long op = 0; op < ops; ++op) {
        block& b = live[r.below(live.size())];
        if (b.p) {
            if (!verify(b, b.n)) {
                fprintf(stderr, "mt_stress: thread %d: block %p (%zu bytes) corrupted\n", id, (void*)b.p, b.n);
                failures.fetch_add(1);
                return;
            }
            const std::size_t k = r.below(10);
            if (k < 3 && b.kind == 0) {   // realloc, keeping the common prefix
                const std::size_t n = random_size(r);
                auto* q = static_cast<unsigned char*>(realloc(b.p, n == 0 ? 1 : n));
                if (!q) {
                    CHECK(!"realloc failed");
                    continue;
                }
                b.p = q;
                const std::size_t keep = n < b.n ? n : b.n;
                if (!verify(b, keep)) {
                    fprintf(stderr, "mt_stress: thread %d: realloc lost contents\n", id);
                    failures.fetch_add(1);
                }
                b.n = n;
                fill(b);
            } else if (k < 6) {   // hand over to another thread
                auto* h = new block(b);
                b.p = nullptr;
                block* old = mailbox[r.below(mailbox_slots)].exchange(h);
                if (old) {
                    if (!verify(*old, old->n)) {
                        fprintf(stderr, "mt_stress: thread %d: foreign block corrupted\n", id);
                        failures.fetch_add(1);
                    }
                    release(*old);
                    delete old;
                }
            } else {
                release(b);
            }
            continue;
        }
        b.n = random_size(r);
        b.seed = static_cast<unsigned char>(r.next());
        b.kind = 0;
        const std::size_t k = r.below(20);
        if (k < 12) {
            b.p = static_cast<unsigned char*>(malloc(b.n));
        } else if (k < 15) {
            b.p = static_cast<unsigned char*>(calloc(1, b.n));
            if (b.p)
                for (std::size_t i = 0; i < b.n; ++i)
                    if (b.p[i] != 0) {
                        CHECK(!"calloc memory not zero");
                        break;
                    }
        } else if (k < 18) {
            const std::size_t a = std::size_t{16} << r.below(9);   // 16 .. 4096
            void* p = nullptr;
            CHECK(posix_memalign(&p, a, b.n) == 0);
            CHECK(reinterpret_cast<std::uintptr_t>(p) % a == 0);
            b.p = static_cast<unsigned char*>(p);
        } else {
            b.kind = 1;
            b.align = std::size_t{32} << r.below(4);
            b.p = static_cast<unsigned char*>(::operator new(b.n, std::align_val_t{b.align}));
            CHECK(reinterpret_cast<std::uintptr_t>(b.p) % b.align == 0);
        }
        if (!b.p) {
            CHECK(!"allocation failed");
            continue;
        }
        CHECK(reinterpret_cast<std::uintptr_t>(b.p) % 16 == 0);
        CHECK(malloc_usable_size(b.p) >= b.n);
        fill(b);
    }
    for (block& b : live) {
        if (b.p && !verify(b, b.n)) CHECK(!"corrupted at the end");
        release(b);
    }
}

void api_checks() {
    // calloc: zeroed, overflow refused with ENOMEM.
    auto* z = static_cast<unsigned char*>(calloc(1000, 10));
    CHECK(z);
    for (int i = 0; z && i < 10000; ++i)
        if (z[i]) {
            CHECK(!"calloc not zeroed");
            break;
        }
    free(z);
    errno = 0;
    // volatile: keep the compiler from rejecting the sizes it can see.
    volatile std::size_t half = SIZE_MAX / 2, huge = SIZE_MAX - 4096;
    CHECK(calloc(half, 3) == nullptr && errno == ENOMEM);
    errno = 0;
    CHECK(malloc(huge) == nullptr && errno == ENOMEM);
    errno = 0;
    CHECK(reallocarray(nullptr, half, 3) == nullptr && errno == ENOMEM);

    // posix_memalign: EINVAL for a non power of two or below sizeof(void*).
    void* p = reinterpret_cast<void*>(1);
    CHECK(posix_memalign(&p, 24, 10) == EINVAL);
    CHECK(posix_memalign(&p, 4, 10) == EINVAL);
    CHECK(p == reinterpret_cast<void*>(1));
    // aligned_alloc: EINVAL for a non power of two; memalign rounds one up
    // (glibc's answer) unless no power of two of size_t is above it.
    errno = 0;
    CHECK(aligned_alloc(24, 48) == nullptr && errno == EINVAL);
    errno = 0;
    CHECK(memalign(SIZE_MAX, 1) == nullptr && errno == EINVAL);
    // Above 1 GiB (the heaps' max_large_alignment): ENOMEM, where glibc
    // 2.36 honours the alignment (docs/bad_input.md).
    void* huge_aligned = &errno;
    CHECK(posix_memalign(&huge_aligned, std::size_t{1} << 31, 64) == ENOMEM && huge_aligned == &errno);
    errno = 0;
    CHECK(aligned_alloc(std::size_t{1} << 31, std::size_t{1} << 31) == nullptr && errno == ENOMEM);
    errno = 0;
    CHECK(memalign((std::size_t{1} << 30) + 4096, 64) == nullptr && errno == ENOMEM);
    void* rounded = memalign(24, 10);
    CHECK(rounded && reinterpret_cast<std::uintptr_t>(rounded) % 32 == 0);
    free(rounded);
    for (std::size_t a = 8; a <= (std::size_t{1} << 20); a <<= 1) {
        for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{100}, std::size_t{5000}, std::size_t{200000}}) {
            void* q = nullptr;
            CHECK(posix_memalign(&q, a, n) == 0);
            CHECK(reinterpret_cast<std::uintptr_t>(q) % a == 0);
            CHECK(malloc_usable_size(q) >= n);
            memset(q, 0xab, n);
            free(q);
        }
        void* m = memalign(a, 77);
        CHECK(m && reinterpret_cast<std::uintptr_t>(m) % a == 0);
        free(m);
        void* al = aligned_alloc(a, a * 2);
        CHECK(al && reinterpret_cast<std::uintptr_t>(al) % a == 0);
        free(al);
    }
    void* v = valloc(10);
    CHECK(v && reinterpret_cast<std::uintptr_t>(v) % 4096 == 0);
    free(v);
    void* pv = pvalloc(10);
    CHECK(pv && reinterpret_cast<std::uintptr_t>(pv) % 4096 == 0 && malloc_usable_size(pv) >= 4096);
    free(pv);

    // realloc in place when usable_size suffices.
    auto* r = static_cast<char*>(malloc(100));
    const std::size_t u = malloc_usable_size(r);
    CHECK(u >= 100);
    strcpy(r, "allotheque");
    auto* same = static_cast<char*>(realloc(r, u));
    CHECK(same == r);
    r = same;
    auto* r2 = static_cast<char*>(realloc(r, 100000));
    CHECK(r2 && strcmp(r2, "allotheque") == 0);
    free(r2);
    CHECK(malloc_usable_size(nullptr) == 0);
    void* m0 = malloc(0);
    CHECK(m0 != nullptr);
    free(m0);

    // operator new / delete, all forms.
    int* i1 = new int(5);
    delete i1;
    int* ia = new int[100];
    delete[] ia;
    struct alignas(256) big {
        char c[300];
    };
    big* b = new big;
    CHECK(reinterpret_cast<std::uintptr_t>(b) % 256 == 0);
    delete b;
    big* ba = new big[3];
    CHECK(reinterpret_cast<std::uintptr_t>(ba) % 256 == 0);
    delete[] ba;
    void* nt = ::operator new(half, std::nothrow);
    CHECK(nt == nullptr);
    bool threw = false;
    try {
        void* x = ::operator new(half);
        ::operator delete(x);
    } catch (const std::bad_alloc&) {
        threw = true;
    }
    CHECK(threw);
    void* s = ::operator new(64);
    ::operator delete(s, 64);
}

} // namespace

int main(int argc, char** argv) {
    // mt_stress [TOTAL_OPS [THREADS | --baseline]]
    const long total_ops = argc > 1 ? atol(argv[1]) : 4000000;
    // 1. Is the preload active?
    const bool baseline = argc > 2 && strcmp(argv[2], "--baseline") == 0;   // timing runs without the preload
    const int threads = argc > 2 && !baseline ? atoi(argv[2]) : 16;
    if (threads < 1 || threads > 1024 || total_ops < threads) {
        fprintf(stderr, "usage: mt_stress [TOTAL_OPS [THREADS | --baseline]]\n");
        return 64;
    }
    const long ops = total_ops / threads;
    // The malloc that serves the program is defined by the library that also
    // defines allotheque_malloc_heap_name (any allotheque malloc, shipped or
    // declared by the user).
    void* m = dlsym(RTLD_DEFAULT, "malloc");
    using name_fn = const char* (*)();
    auto name = reinterpret_cast<name_fn>(dlsym(RTLD_DEFAULT, "allotheque_malloc_heap_name"));
    Dl_info info{}, name_info{};
    if (baseline) {
        // no preload checks
    } else if (!m || !name || !dladdr(m, &info) || !info.dli_fname ||
               !dladdr(reinterpret_cast<void*>(name), &name_info) || !name_info.dli_fname ||
               strcmp(info.dli_fname, name_info.dli_fname) != 0) {
        fprintf(stderr, "mt_stress: malloc is not allotheque's (found in %s)\n",
                info.dli_fname ? info.dli_fname : "?");
        return 1;
    }
    if (!name && baseline) name = [] { return "system malloc"; };
    if (!name) {
        fprintf(stderr, "mt_stress: allotheque_malloc_heap_name not found\n");
        return 1;
    }

    api_checks();

    // 3 + 4. Workers, and forks while they run.
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) ts.emplace_back(worker, t, ops);
    int forks = 0;
    for (int f = 0; f < 20; ++f) {
        usleep(20000);
        pid_t pid = fork();
        if (pid == 0) {
            alarm(20);
            for (int i = 0; i < 1000; ++i) free(malloc(static_cast<std::size_t>(i * 13)));
            std::vector<std::string> v;
            for (int i = 0; i < 1000; ++i) v.push_back(std::string(100, 'x'));
            _exit(0);
        }
        int st = 0;
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "mt_stress: forked child failed (status %d)\n", st);
            failures.fetch_add(1);
        }
        ++forks;
    }
    for (auto& t : ts) t.join();
    for (auto& slot : mailbox) {
        block* b = slot.exchange(nullptr);
        if (b) {
            if (!verify(*b, b->n)) CHECK(!"mailbox block corrupted");
            release(*b);
            delete b;
        }
    }
    if (failures.load() != 0) {
        fprintf(stderr, "mt_stress: %d failures\n", failures.load());
        return 1;
    }
    printf("OK %s (%d threads x %ld ops, %d forks)\n", name(), threads, ops, forks);
    return 0;
}
