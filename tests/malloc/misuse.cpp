// Bad input and hard cases for liballotheque_malloc_<heap>.so, one case per
// run (run under LD_PRELOAD by run_misuse.sh, which checks how it ends):
//
// Must abort with a message (run_misuse.sh checks SIGABRT and stderr):
//   double_free          free(p) twice, same thread
//   double_free_remote   thread A allocates, B frees it twice
//   double_free_mixed    B frees A's block, then A frees it again
//   double_free_large    a 1 MiB block freed twice
//   double_free_realloc_zero   realloc(p, 0) returns NULL having freed p
//                        (glibc's answer), so a free(p) after it is a double free
//   interior             free(p + 64) of a 256-byte block
//   interior_large       free(p + 4096) of a 1 MiB block
//   wrapped / wrapped_large   free(p + 2^48) of a 256-byte / 1 MiB block: an
//                        address free's page map lookup takes modulo 2^48
//                        (onto p's own entry), that must still be refused
//   foreign_stack / foreign_global / foreign_mmap   free of memory no heap gave
//   foreign_mapped_header  free of a mapping's byte 16, after a header with
//                        glibc's mapped-chunk bit and a length off page bounds
//   foreign_arena_header free of a chunk with glibc's other-arena bit in a
//                        64 MiB-aligned mapping whose heap header names an
//                        arena in the next 64 MiB, whose header does not
//                        name it
//   usable_foreign       malloc_usable_size of a stack address
//   realloc_foreign      realloc of a global's address
// Must succeed and print "OK ..." (exit 0):
//   never_twice          a double free caught, never two live blocks at one address
//                        (the abort happens in a child; the parent checks
//                        that no malloc before it returned a live address twice)
//   reuse_sizes          under RLIMIT_AS: fill with 24-byte blocks until malloc
//                        fails, free them all, then other sizes (3000 B, 100 KB)
//                        get most of that memory back
//   thread_churn         10,000 short-lived threads, each leaving blocks for the
//                        next to free: heaps stay bounded, contents intact
//   trim                 RSS drops after a 100 MB workload is freed and malloc_trim runs
//   distinct_sizes       rounds of 1 MiB in blocks of one size, every 16-byte step
//                        from 1 KiB to 8 KiB, each round freed before the next:
//                        RSS stays within a few MiB of one round (an exact-size
//                        heap that kept a chunk per size would grow by hundreds)
//   fork_threads         fork while 4 threads allocate; the child allocates and exits
//   free_null            free(NULL), free(NULL) again, then a malloc/free pair:
//                        nothing happens (free's fast path sends null the way
//                        of every pointer it does not recognise)
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace {

char global_buffer[4096];

[[noreturn]] void die(const char* what) {
    fprintf(stderr, "FAIL: %s\n", what);
    exit(1);
}

using counter_fn = size_t (*)();
size_t heap_count() {
    auto f = reinterpret_cast<counter_fn>(dlsym(RTLD_DEFAULT, "allotheque_malloc_heap_count"));
    return f ? f() : 0;
}

long rss_kib() {
    FILE* f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long v = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0) v = atol(line + 6);
    fclose(f);
    return v;
}

void* volatile sink;   // keeps the compiler from eliding the calls under test

int reuse_sizes() {
    // Room for this process as it is now plus 512 MiB, as `ulimit -v` would give.
    FILE* f = fopen("/proc/self/status", "r");
    long vm_kib = 0;
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmSize:", 7) == 0) vm_kib = atol(line + 7);
    if (f) fclose(f);
    const rlim_t limit = static_cast<rlim_t>(vm_kib) * 1024 + (rlim_t{512} << 20);
    rlimit rl{limit, limit};
    if (setrlimit(RLIMIT_AS, &rl) != 0) die("setrlimit");
    // The pointers live in a list threaded through the blocks themselves.
    void* head = nullptr;
    size_t small = 0;
    for (;;) {
        void* p = malloc(24);
        if (!p) break;
        *static_cast<void**>(p) = head;
        head = p;
        ++small;
    }
    printf("filled %zu blocks of 24 bytes (%zu MiB)\n", small, small * 24 >> 20);
    if (small < (size_t{200} << 20) / 32) die("the fill stopped far below the limit");
    while (head) {
        void* next = *static_cast<void**>(head);
        free(head);
        head = next;
    }
    // Now other sizes: at least 60 % of the bytes the 24-byte fill reached.
    size_t got = 0;
    std::vector<void*>* keep = new std::vector<void*>();
    keep->reserve(200000);
    for (size_t n : {size_t{3000}, size_t{100000}}) {
        for (;;) {
            if (keep->size() == keep->capacity()) break;
            void* p = malloc(n);
            if (!p) break;
            memset(p, 0x5a, 64);
            keep->push_back(p);
            got += n;
            if (got >= small * 24) break;
        }
    }
    printf("then %zu MiB in blocks of 3000 and 100000 bytes\n", got >> 20);
    if (got < small * 24 / 10 * 6) die("memory freed as 24-byte blocks did not serve other sizes");
    for (void* p : *keep) free(p);
    delete keep;
    printf("OK reuse_sizes\n");
    return 0;
}

int thread_churn() {
    struct handoff {
        std::atomic<void*> block{nullptr};
    };
    static handoff box[8];
    const size_t before = heap_count();
    for (int round = 0; round < 10000; ++round) {
        std::thread t([round] {
            handoff& b = box[round % 8];
            // Free what an earlier thread left here (its heap may be orphaned by now).
            if (void* old = b.block.exchange(nullptr)) {
                const auto* c = static_cast<const unsigned char*>(old);
                for (int i = 0; i < 200; ++i)
                    if (c[i] != static_cast<unsigned char>((round - 8) & 0xff)) die("a block left by an exited thread changed");
                free(old);
            }
            std::vector<void*> local;
            for (int i = 0; i < 50; ++i) local.push_back(malloc(16 + (i * 37) % 2000));
            for (void* p : local) free(p);
            void* keep = malloc(200);
            memset(keep, round & 0xff, 200);
            b.block.store(keep);
        });
        t.join();
    }
    for (handoff& b : box) free(b.block.exchange(nullptr));
    const size_t after = heap_count();
    printf("heaps: %zu before, %zu after 10000 threads\n", before, after);
    if (after > before + 4) die("thread heaps were not reused");
    printf("OK thread_churn\n");
    return 0;
}

int trim() {
    const long base = rss_kib();
    std::vector<void*> v;
    for (int i = 0; i < 100 * 1024 * 1024 / 256; ++i) {
        void* p = malloc(24 + (i * 53) % 400);
        memset(p, 1, 24);
        v.push_back(p);
    }
    for (int i = 0; i < 20; ++i) {
        void* p = malloc(1 << 20);
        memset(p, 2, 1 << 20);
        v.push_back(p);
    }
    const long peak = rss_kib();
    for (void* p : v) free(p);
    std::vector<void*>().swap(v);
    const long freed = rss_kib();
    malloc_trim(0);
    const long trimmed = rss_kib();
    printf("RSS KiB: base %ld, peak %ld, after free %ld, after malloc_trim %ld\n", base, peak, freed, trimmed);
    if (peak - base < 100 * 1024) die("the workload did not reach 100 MB");
    if ((trimmed - base) * 10 > peak - base) die("less than 90 % of the memory went back after malloc_trim");
    printf("OK trim\n");
    return 0;
}

int distinct_sizes() {
    const long base = rss_kib();
    long peak = base;
    std::vector<void*> v;
    for (size_t n = 1024; n <= 8192; n += 16) {
        for (size_t got = 0; got < (size_t{1} << 20); got += n) {
            auto* p = static_cast<unsigned char*>(malloc(n));
            if (!p) die("malloc failed");
            p[0] = p[n - 1] = static_cast<unsigned char>(n);   // touch both ends
            v.push_back(p);
        }
        peak = std::max(peak, rss_kib());
        for (void* p : v) {
            auto* b = static_cast<unsigned char*>(p);
            if (b[0] != static_cast<unsigned char>(n)) die("a block changed while live");
            free(p);
        }
        v.clear();
    }
    printf("RSS KiB: base %ld, peak %ld (449 sizes, 1 MiB live at a time)\n", base, peak);
    if (peak - base > 32 * 1024) die("freed blocks were not reused for nearby sizes (RSS grew by more than 32 MiB)");
    printf("OK distinct_sizes\n");
    return 0;
}

int fork_threads() {
    std::atomic<bool> stop{false};
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; ++t)
        ts.emplace_back([&stop, t] {
            std::vector<void*> v(512, nullptr);
            unsigned x = 12345u + static_cast<unsigned>(t);
            while (!stop.load(std::memory_order_relaxed)) {
                x = x * 1103515245u + 12345u;
                void*& s = v[x % v.size()];
                free(s);
                s = malloc(8 + (x >> 8) % 3000);
            }
            for (void* p : v) free(p);
        });
    for (int k = 0; k < 50; ++k) {
        const pid_t pid = fork();
        if (pid == 0) {
            alarm(20);   // a lock held across fork would hang here
            std::vector<void*> v;
            for (int i = 0; i < 10000; ++i) v.push_back(malloc(8 + i % 5000));
            for (void* p : v) free(p);
            std::thread t([] { free(malloc(100)); });
            t.join();
            _exit(0);
        }
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            die("a child forked while threads allocated did not exit cleanly");
    }
    stop.store(true);
    for (auto& t : ts) t.join();
    printf("OK fork_threads\n");
    return 0;
}

int never_twice() {
    // Live addresses are unique; then a double free must not make two later
    // mallocs return the same address (it aborts, in a child).
    std::vector<void*> v;
    for (int i = 0; i < 100000; ++i) v.push_back(malloc(24));
    std::vector<uintptr_t> a(v.size());
    for (size_t i = 0; i < v.size(); ++i) a[i] = reinterpret_cast<uintptr_t>(v[i]);
    std::sort(a.begin(), a.end());
    if (std::adjacent_find(a.begin(), a.end()) != a.end()) die("two live blocks at one address");
    for (void* p : v) free(p);
    const pid_t pid = fork();
    if (pid == 0) {
        void* p = malloc(24);
        free(p);
        free(p);   // must abort here
        void* x = malloc(24);
        void* y = malloc(24);
        _exit(x == y ? 3 : 4);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT) die("a double free was not stopped");
    printf("OK never_twice\n");
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 2) return 64;
    const std::string c = argv[1];
    if (c == "double_free") {
        void* p = malloc(24);
        free(p);
        free(p);
    } else if (c == "double_free_remote") {
        void* p = malloc(40);
        std::thread([p] {
            free(p);
            free(p);
        }).join();
    } else if (c == "double_free_mixed") {
        void* p = malloc(40);
        std::thread([p] { free(p); }).join();
        free(p);
    } else if (c == "double_free_large") {
        void* p = malloc(1 << 20);
        free(p);
        free(p);
    } else if (c == "double_free_realloc_zero") {
        void* p = malloc(40);
        sink = p;
        if (realloc(p, 0) != nullptr) die("realloc(p, 0) did not return NULL");
        free(p);
    } else if (c == "interior") {
        auto* p = static_cast<char*>(malloc(256));
        free(p + 64);
    } else if (c == "interior_large") {
        auto* p = static_cast<char*>(malloc(1 << 20));
        free(p + 4096);
    } else if (c == "wrapped" || c == "wrapped_large") {
        auto* p = static_cast<char*>(malloc(c == "wrapped" ? 256 : 1 << 20));
        sink = p;
        // Through an integer: the address is not a pointer the program holds.
        free(reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) + (uintptr_t{1} << 48)));
    } else if (c == "free_null") {
        free(nullptr);
        free(nullptr);
        void* p = malloc(24);
        sink = p;
        free(p);
        puts("OK free(NULL) did nothing");
        return 0;
    } else if (c == "foreign_stack") {
        alignas(64) char local[256];
        sink = local;
        free(local);
    } else if (c == "foreign_global") {
        free(global_buffer + 64);
    } else if (c == "foreign_mmap") {
        void* m = mmap(nullptr, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        free(static_cast<char*>(m) + 4096);
    } else if (c == "foreign_mapped_header") {
        // Where glibc's large blocks keep their header, one that is not
        // glibc's: the mapped bit set, a length off page boundaries.
        void* m = mmap(nullptr, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        const size_t head[2] = {0, 4096 + 100 + 2};
        memcpy(m, head, sizeof head);
        free(static_cast<char*>(m) + 16);
    } else if (c == "foreign_arena_header") {
        // Where glibc's other arenas keep a heap's header, at a 64 MiB
        // boundary, one that is not glibc's: its arena pointer names memory
        // that does not name itself back.
        const size_t align = size_t{64} << 20;
        // A second heap's: an arena in the first heap of its own would name
        // itself by construction.
        auto* m = static_cast<char*>(
            mmap(nullptr, 3 * align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
        char* heap = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(m) + align - 1) & ~(align - 1));
        const uintptr_t info[3] = {reinterpret_cast<uintptr_t>(heap) + align + 48, 0, 1 << 20};
        memcpy(heap, info, sizeof info);
        const size_t head[2] = {0, 256 | 4 | 1};
        memcpy(heap + 4096, head, sizeof head);
        free(heap + 4096 + 16);
    } else if (c == "usable_foreign") {
        alignas(64) char local[256];
        sink = local;
        printf("%zu\n", malloc_usable_size(local));
    } else if (c == "realloc_foreign") {
        sink = realloc(global_buffer, 100);
    } else if (c == "never_twice") {
        return never_twice();
    } else if (c == "distinct_sizes") {
        return distinct_sizes();
    } else if (c == "reuse_sizes") {
        return reuse_sizes();
    } else if (c == "thread_churn") {
        return thread_churn();
    } else if (c == "trim") {
        return trim();
    } else if (c == "fork_threads") {
        return fork_threads();
    } else {
        return 64;
    }
    fprintf(stderr, "FAIL: %s returned\n", c.c_str());
    return 1;
}
