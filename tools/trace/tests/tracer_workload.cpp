// The program the tracer tests run under `allotheque-trace record`. It makes a
// known sequence of allocation calls and writes, for each thread, the events
// the trace must contain (LOGDIR/expected.<tag>, one line per event: op size
// address old_address align_log2 sized failed; "*" = any events may come
// here). Logs are kept in mmap'd memory and written with write(2), so logging
// adds no allocation of its own to the trace. tracer_check compares.
//
//   tracer_workload sequence LOGDIR   every malloc-family and new/delete form,
//                                     failures, 2 x 4 threads with cross-thread
//                                     frees, a fork child, a bystander thread
//   tracer_workload many LOGDIR N     N events in one thread (many buffers)
//   tracer_workload killed            allocates, then SIGKILLs itself
//   tracer_workload exit_threads      exit() while two threads allocate
//   tracer_workload exec_fail LOGDIR FILE   allocates, execs FILE (which
//                                     must fail with ENOEXEC), allocates again
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <new>
#include <functional>
#include <thread>

namespace {

template <class T>
inline void keep(T* p) {
    asm volatile("" : : "r"(p) : "memory");  // the compiler may not elide the allocation
}
// After a function's last call: no tail call, whose return address would be
// our caller's (a call site outside this program).
inline void no_tail_call() { asm volatile("" : : : "memory"); }

// An append-only text log in mmap'd memory.
struct log_buffer {
    char* p = nullptr;
    std::size_t len = 0, cap = 0;
    void init(std::size_t bytes) {
        void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) _exit(3);
        p = static_cast<char*>(m);
        cap = bytes;
        len = 0;
    }
    void put(const char* s) {
        const std::size_t n = strlen(s);
        if (len + n > cap) _exit(4);
        memcpy(p + len, s, n);
        len += n;
    }
    void put_uint(std::uint64_t v, int base = 10) {
        char tmp[32];
        char* q = tmp + sizeof tmp;
        *--q = '\0';
        do {
            *--q = "0123456789abcdef"[v % unsigned(base)];
            v /= unsigned(base);
        } while (v);
        if (base == 16) put("0x");
        put(q);
    }
    void event(const char* op, std::uint64_t size, const void* address, std::uintptr_t old = 0,
               unsigned align_log2 = 0, bool sized = false, bool failed = false) {
        put(op);
        put(" ");
        put_uint(size);
        put(" ");
        put_uint(reinterpret_cast<std::uint64_t>(address), 16);
        put(" ");
        put_uint(old, 16);
        put(" ");
        put_uint(align_log2);
        put(sized ? " 1" : " 0");
        put(failed ? " 1\n" : " 0\n");
    }
    void gap() { put("*\n"); }
    void write_to(const char* dir, const char* name) const {
        char path[4096];
        path[0] = '\0';
        strncat(path, dir, 2000);
        strcat(path, "/");
        strncat(path, name, 1000);
        const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) _exit(5);
        std::size_t off = 0;
        while (off < len) {
            const ssize_t w = write(fd, p + off, len - off);
            if (w <= 0) _exit(6);
            off += std::size_t(w);
        }
        close(fd);
    }
};

// No malloc can give this much. Read at run time, so that the compiler does
// not warn about (or fold) the impossible requests.
volatile std::size_t huge_bytes = std::size_t(1) << 62;
volatile std::size_t calloc_count = SIZE_MAX / 8;

// --- the single-thread sequence ---------------------------------------------
int handler_calls = 0;
void give_up_handler() {
    ++handler_calls;
    std::set_new_handler(nullptr);  // the next failure throws
}

void c_family(log_buffer& L) {
    const std::size_t huge = huge_bytes;
    void* m0 = malloc(1000001);
    keep(m0);
    L.event("malloc", 1000001, m0);
    L.event("free", 0, m0);
    free(m0);

    void* p = malloc(24);
    keep(p);
    L.event("malloc", 24, p);
    void* c = calloc(10, 12);
    keep(c);
    L.event("calloc", 120, c);
    void* volatile null = nullptr;  // (GCC turns a literal realloc(NULL, n) into malloc(n))
    void* r = realloc(null, 40);
    keep(r);
    L.event("realloc", 40, r);
    const auto ru = reinterpret_cast<std::uintptr_t>(r);
    void* r2 = realloc(r, 40000);  // grow (moves)
    keep(r2);
    L.event("realloc", 40000, r2, ru);
    const auto r2u = reinterpret_cast<std::uintptr_t>(r2);
    void* r3 = realloc(r2, 10);  // shrink
    keep(r3);
    L.event("realloc", 10, r3, r2u);
    const auto r3u = reinterpret_cast<std::uintptr_t>(r3);
    void* r4 = realloc(r3, 0);  // glibc: frees r3, returns NULL (not a failure)
    keep(r4);
    L.event("realloc", 0, r4, r3u);
    void* ra = reallocarray(null, 8, 9);
    keep(ra);
    L.event("realloc", 72, ra);

    void* pm = nullptr;
    if (posix_memalign(&pm, 64, 100) != 0) _exit(7);
    keep(pm);
    L.event("posix_memalign", 100, pm, 0, 6);
    void* aa = aligned_alloc(128, 256);
    keep(aa);
    L.event("aligned_alloc", 256, aa, 0, 7);
    void* ma = memalign(4096, 100);
    keep(ma);
    L.event("memalign", 100, ma, 0, 12);
    void* va = valloc(1000);
    keep(va);
    L.event("valloc", 1000, va, 0, 12);
    void* pv = pvalloc(1000);  // recorded as valloc of the rounded size
    keep(pv);
    L.event("valloc", 4096, pv, 0, 12);

    for (void* q : {pm, aa, ma, va, pv, p, c, ra}) {
        L.event("free", 0, q);
        free(q);
    }
    L.event("free", 0, nullptr);
    free(null);  // (a literal free(NULL) is dropped by GCC)

    // Failures.
    void* f1 = malloc(huge);
    keep(f1);
    L.event("malloc", huge, f1, 0, 0, false, true);
    void* f2 = calloc(calloc_count, 16);  // overflow: recorded with size SIZE_MAX
    keep(f2);
    L.event("calloc", SIZE_MAX, f2, 0, 0, false, true);
    void* f3 = nullptr;
    if (posix_memalign(&f3, 24, 10) != EINVAL) _exit(8);  // not a power of two
    L.event("posix_memalign", 10, nullptr, 0, 5, false, true);
    void* keepme = malloc(50);
    keep(keepme);
    L.event("malloc", 50, keepme);
    void* volatile still_valid = keepme;  // (GCC cannot know that a failed realloc keeps it)
    void* f4 = realloc(keepme, huge);     // fails, keepme stays valid
    keep(f4);
    keepme = still_valid;
    L.event("realloc", huge, f4, reinterpret_cast<std::uintptr_t>(keepme), 0, false, true);
    L.event("free", 0, keepme);
    free(keepme);
    no_tail_call();
}

void cxx_family(log_buffer& L) {
    const std::size_t huge = huge_bytes;
    using std::align_val_t;
    void* a;
    a = ::operator new(32);
    L.event("new", 32, a);
    L.event("delete", 0, a);
    ::operator delete(a);
    a = ::operator new(33);
    L.event("new", 33, a);
    L.event("delete", 33, a, 0, 0, true);
    ::operator delete(a, 33);
    a = ::operator new[](40);
    L.event("new[]", 40, a);
    L.event("delete[]", 0, a);
    ::operator delete[](a);
    a = ::operator new[](41);
    L.event("new[]", 41, a);
    L.event("delete[]", 41, a, 0, 0, true);
    ::operator delete[](a, 41);
    a = ::operator new(50, std::nothrow);
    L.event("new", 50, a);
    L.event("delete", 0, a);
    ::operator delete(a, std::nothrow);
    a = ::operator new[](51, std::nothrow);
    L.event("new[]", 51, a);
    L.event("delete[]", 0, a);
    ::operator delete[](a, std::nothrow);
    a = ::operator new(64, align_val_t(64));
    L.event("new", 64, a, 0, 6);
    L.event("delete", 0, a, 0, 6);
    ::operator delete(a, align_val_t(64));
    a = ::operator new(65, align_val_t(128));
    L.event("new", 65, a, 0, 7);
    L.event("delete", 65, a, 0, 7, true);
    ::operator delete(a, 65, align_val_t(128));
    a = ::operator new[](66, align_val_t(256));
    L.event("new[]", 66, a, 0, 8);
    L.event("delete[]", 0, a, 0, 8);
    ::operator delete[](a, align_val_t(256));
    a = ::operator new[](67, align_val_t(32));
    L.event("new[]", 67, a, 0, 5);
    L.event("delete[]", 67, a, 0, 5, true);
    ::operator delete[](a, 67, align_val_t(32));
    a = ::operator new(68, align_val_t(64), std::nothrow);
    L.event("new", 68, a, 0, 6);
    L.event("delete", 0, a, 0, 6);
    ::operator delete(a, align_val_t(64), std::nothrow);
    a = ::operator new[](69, align_val_t(64), std::nothrow);
    L.event("new[]", 69, a, 0, 6);
    L.event("delete[]", 0, a, 0, 6);
    ::operator delete[](a, align_val_t(64), std::nothrow);

    // Failures that do not throw.
    a = ::operator new(huge, std::nothrow);
    L.event("new", huge, a, 0, 0, false, true);
    a = ::operator new[](huge, align_val_t(64), std::nothrow);
    L.event("new[]", huge, a, 0, 6, false, true);

    // A throwing failure, after one new_handler call. The exception object is
    // malloc'd by the C++ runtime: those events are not ours ("*").
    std::set_new_handler(&give_up_handler);
    bool caught = false;
    try {
        a = ::operator new(huge);
        keep(a);
    } catch (const std::bad_alloc&) {
        caught = true;
    }
    if (!caught || handler_calls != 1) _exit(9);
    L.event("new", huge, nullptr, 0, 0, false, true);
    L.gap();
    void* m1 = malloc(1000002);
    keep(m1);
    L.event("malloc", 1000002, m1);
    L.event("free", 0, m1);
    free(m1);
    no_tail_call();
}

// --- threads ----------------------------------------------------------------
struct spin_barrier {
    std::atomic<int> count{0}, generation{0};
    int n;
    explicit spin_barrier(int parties) : n(parties) {}
    void wait() {
        const int g = generation.load();
        if (count.fetch_add(1) + 1 == n) {
            count.store(0);
            generation.fetch_add(1);
        } else {
            while (generation.load() == g) std::this_thread::yield();
        }
    }
};

constexpr int workers = 4;
constexpr int per_worker = 2000;
void* slots[workers][per_worker];
log_buffer worker_log[2 * workers];

void worker(int round, int k, spin_barrier& b) {
    log_buffer& L = worker_log[round * workers + k];
    void* m = malloc(3000000 + std::size_t(round * workers + k));
    keep(m);
    L.event("malloc", 3000000 + std::uint64_t(round * workers + k), m);
    L.event("free", 0, m);
    free(m);
    for (int i = 0; i < per_worker; ++i) {
        const std::size_t n = 8 + std::size_t((i * 37 + k * 11) % 700);
        if (i % 2 == 0) {
            slots[k][i] = malloc(n);
            L.event("malloc", n, slots[k][i]);
        } else {
            slots[k][i] = ::operator new(n);
            L.event("new", n, slots[k][i]);
        }
        keep(slots[k][i]);
    }
    b.wait();
    const int from = (k + 1) % workers;  // free the neighbour's objects
    for (int i = 0; i < per_worker; ++i) {
        const std::size_t n = 8 + std::size_t((i * 37 + from * 11) % 700);
        if (i % 2 == 0) {
            L.event("free", 0, slots[from][i]);
            free(slots[from][i]);
        } else {
            L.event("delete", n, slots[from][i], 0, 0, true);
            ::operator delete(slots[from][i], n);
        }
    }
    b.wait();
    m = malloc(3100000 + std::size_t(round * workers + k));
    keep(m);
    L.event("malloc", 3100000 + std::uint64_t(round * workers + k), m);
    L.event("free", 0, m);
    free(m);
    no_tail_call();
}

std::atomic<int> bystander_state{0};
log_buffer bystander_log;
void bystander() {
    log_buffer& L = bystander_log;
    void* m = malloc(5000000);  // stays in this thread's buffer while main forks
    keep(m);
    L.event("malloc", 5000000, m);
    L.event("free", 0, m);
    free(m);
    bystander_state.store(1);
    while (bystander_state.load() != 2) std::this_thread::yield();
}

void put_info(log_buffer& info, const char* key, std::uint64_t v) {
    info.put(key);
    info.put(" ");
    info.put_uint(v);
    info.put("\n");
}

int sequence(const char* dir) {
    log_buffer main_log, info, child_log;
    main_log.init(1 << 20);
    info.init(1 << 16);
    child_log.init(1 << 16);
    for (auto& l : worker_log) l.init(1 << 20);
    bystander_log.init(1 << 16);

    c_family(main_log);
    cxx_family(main_log);

    for (int round = 0; round < 2; ++round) {  // the second round reuses the first's buffers
        spin_barrier b(workers);
        std::thread t[workers];
        for (int k = 0; k < workers; ++k) t[k] = std::thread(worker, round, k, std::ref(b));
        for (auto& x : t) x.join();
    }

    std::thread by(bystander);
    while (bystander_state.load() != 1) std::this_thread::yield();
    const pid_t child = fork();
    if (child < 0) return 10;
    if (child == 0) {
        void* m = malloc(4000000);
        keep(m);
        child_log.event("malloc", 4000000, m);
        child_log.event("free", 0, m);
        free(m);
        void* q = ::operator new[](777);
        child_log.event("new[]", 777, q);
        child_log.event("delete[]", 0, q);
        ::operator delete[](q);
        child_log.write_to(dir, "expected.child");
        exit(0);  // not _exit: the tracer writes the child's END record at exit
    }
    int status = 0;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 11;
    bystander_state.store(2);
    by.join();

    main_log.write_to(dir, "expected.main");
    char name[32];
    for (int i = 0; i < 2 * workers; ++i) {
        std::snprintf(name, sizeof name, "expected.w%d", i);
        worker_log[i].write_to(dir, name);
    }
    bystander_log.write_to(dir, "expected.by");
    put_info(info, "pid", std::uint64_t(getpid()));
    put_info(info, "child", std::uint64_t(child));
    put_info(info, "threads", 1 + 2 * workers + 1);
    info.write_to(dir, "info");
    return 0;
}

// --- many events: several buffers' worth, checked one by one ----------------
int many(const char* dir, long n) {
    log_buffer L, info;
    L.init(std::size_t(n) * 64 + 4096);
    info.init(4096);
    void* ring[64] = {};
    void* m = malloc(6000000);
    keep(m);
    L.event("malloc", 6000000, m);
    L.event("free", 0, m);
    free(m);
    std::uint64_t x = 88172645463325252ull;
    for (long i = 0; i < n / 2; ++i) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        void*& slot = ring[i % 64];
        if (slot) {
            L.event("free", 0, slot);
            free(slot);
        }
        const std::size_t size = 1 + (x % 4096 < 4000 ? x % 256 : x % 100000);
        slot = malloc(size);
        keep(slot);
        L.event("malloc", size, slot);
    }
    for (void* p : ring) {
        if (!p) continue;
        L.event("free", 0, p);
        free(p);
    }
    L.write_to(dir, "expected.main");
    put_info(info, "pid", std::uint64_t(getpid()));
    put_info(info, "threads", 1);
    put_info(info, "min_blocks", std::uint64_t(n) * 3 / 65536);  // >= 3 bytes an event
    info.write_to(dir, "info");
    return 0;
}

int killed() {
    // Enough to flush a few blocks, then die without any exit processing.
    for (int i = 0; i < 100000; ++i) {
        void* p = malloc(std::size_t(16 + i % 1000));
        keep(p);
        free(p);
    }
    kill(getpid(), SIGKILL);
    pause();
    return 1;
}

void churn(int k) {
    void* ring[16] = {};
    for (unsigned long i = 0;; ++i) {
        void*& s = ring[i % 16];
        free(s);
        s = i % 3 ? malloc(16 + (i * 7 + unsigned(k)) % 300) : ::operator new(24);
        if (i % 3 == 0) {
            ::operator delete(s);
            s = nullptr;
        }
        keep(s);
    }
}

int exit_threads() {
    std::thread(churn, 1).detach();
    std::thread(churn, 2).detach();
    usleep(100000);
    exit(0);  // the two threads are still allocating
}

// --- an exec that fails: the trace goes on, every event in it -------------
int exec_fail(const char* dir, const char* program) {
    log_buffer L, info;
    L.init(1 << 16);
    info.init(4096);
    for (int round = 0; round < 2; ++round) {
        for (std::size_t i = 0; i < 100; ++i) {
            void* p = malloc(16 + i * 8);
            keep(p);
            L.event("malloc", 16 + i * 8, p);
            L.event("free", 0, p);
            free(p);
        }
        if (round == 0) {
            char* const args[] = {const_cast<char*>(program), nullptr};
            execv(program, args);
            if (errno != ENOEXEC) {
                std::fprintf(stderr, "tracer_workload: exec of %s did not fail with ENOEXEC\n", program);
                return 3;
            }
        }
    }
    L.write_to(dir, "expected.main");
    put_info(info, "pid", std::uint64_t(getpid()));
    put_info(info, "threads", 1);
    info.write_to(dir, "info");
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fputs("usage: tracer_workload sequence LOGDIR | many LOGDIR N | killed | exit_threads | exec_fail LOGDIR FILE\n", stderr);
        return 2;
    }
    const char* mode = argv[1];
    if (!strcmp(mode, "sequence") && argc == 3) return sequence(argv[2]);
    if (!strcmp(mode, "many") && argc == 4) return many(argv[2], atol(argv[3]));
    if (!strcmp(mode, "killed")) return killed();
    if (!strcmp(mode, "exit_threads")) return exit_threads();
    if (!strcmp(mode, "exec_fail") && argc == 4) return exec_fail(argv[2], argv[3]);
    std::fputs("tracer_workload: bad arguments\n", stderr);
    return 2;
}
