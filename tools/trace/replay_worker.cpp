// allotheque-replay-worker --allocator NAME PLAN
//
// Replays one replay plan (replay_plan.hpp, written by `allotheque-trace
// replay`) on one allocator in this process, and prints one JSON line: time of
// the replay loop, peak OS memory (growth of the resident set, measured the way
// bench/olden/driver.hpp does), fragmentation. One process per allocator, so
// each peak is the allocator's own.
//
// Allocators: the malloc libraries glibc, jemalloc, mimalloc, tcmalloc and
// malloc-<heap>, an allotheque malloc (malloc/free/realloc/posix_memalign; all
// but glibc must be LD_PRELOADed, which is checked: the peers in
// /proc/self/maps, an allotheque malloc by the heap name its library reports,
// so that malloc-velox is liballotheque_malloc_velox.so or a malloc declared
// with the name "velox"); pmr (std::pmr::unsynchronized_pool_resource); and the
// header-only allotheque heaps segregated, kingsley, quickfit, velox, medius,
// defero, lea, lea_deferred, kingsley_coalescing, with their default options
// (request{size, hint, alignment}; realloc = allocate near the old block +
// copy + deallocate; frees carry the size).
//
// Everything the worker needs besides the allocator under test — the plan (a
// read-only mapping of the plan file) and the slot table (anonymous memory) —
// is mapped and populated BEFORE the peak is reset, outside every allocator, so
// it is identical for every allocator and not part of the measured growth.
// Each new object is touched — its first and last 64 bytes, and one byte per
// page of its first touch_limit bytes (from the plan: replay --touch-limit,
// default 1 MiB; replay_plan.hpp) — so
// that the resident set reflects it; each allocation reads one byte of its
// hint object, as a program linking a new node to a neighbour does.
//
// Exit status: 0 success; 1 allocation failure, bad plan, wrong malloc
// library (message on stderr); 2 bad usage.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory_resource>
#include <new>
#include <string>
#include <string_view>

#include <allotheque/allocators/defero.hpp>
#include <allotheque/allocators/kingsley.hpp>
#include <allotheque/allocators/kingsley_coalescing.hpp>
#include <allotheque/allocators/lea.hpp>
#include <allotheque/allocators/medius.hpp>
#include <allotheque/allocators/quickfit.hpp>
#include <allotheque/allocators/segregated.hpp>
#include <allotheque/allocators/velox.hpp>
#include <allotheque/heap.hpp>
#include <allotheque/malloc_stats.h>

#include "process_memory.hpp"
#include "replay_plan.hpp"

namespace {

namespace rp = allotheque::tools::replay;
const char* const me = "allotheque-replay-worker";

[[noreturn]] void die(const std::string& msg) {
    std::fprintf(stderr, "%s: %s\n", me, msg.c_str());
    std::exit(1);
}

// Memory measurement, shared with bench/olden/driver.hpp: plain syscalls, so
// the measurement itself never calls the allocator under test.
using allotheque::tools::malloc_library;
using allotheque::tools::memory_probe;

// Anonymous, populated memory outside every allocator.
void* map_populated(std::size_t bytes) {
    if (bytes == 0) bytes = 1;
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) die("cannot map " + std::to_string(bytes) + " bytes for the slots: " + std::strerror(errno));
    return p;
}

// ---------------------------------------------------------------------------
// The plan
// ---------------------------------------------------------------------------

struct loaded_plan {
    rp::plan_header header;
    const rp::plan_op* ops = nullptr;
};

// One flag a slot for rp::check_op, in memory that is not the malloc's.
struct mapped_flags {
    unsigned char* flag;
    std::size_t n;
    std::size_t size() const noexcept { return n; }
    unsigned char& operator[](std::size_t i) noexcept { return flag[i]; }
};

loaded_plan load_plan(const char* path) {
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) die(std::string("cannot open replay plan '") + path + "': " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) die(std::string("'") + path + "' is not a regular file");
    const auto bytes = static_cast<std::uint64_t>(st.st_size);
    if (bytes < sizeof(rp::plan_header)) die(std::string("bad replay plan '") + path + "': shorter than its header");
    // A private read-only mapping, populated now: the plan's pages are
    // resident before the peak is reset, and shared with the page cache.
    void* m = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (m == MAP_FAILED) die(std::string("cannot map replay plan '") + path + "': " + std::strerror(errno));
    ::close(fd);
    const char* mem = static_cast<const char*>(m);
    loaded_plan p;
    std::memcpy(&p.header, mem, std::min<std::uint64_t>(bytes, sizeof p.header));
    if (const std::string why = rp::check_header(p.header, bytes); !why.empty())
        die(std::string("bad replay plan '") + path + "': " + why);
    p.ops = reinterpret_cast<const rp::plan_op*>(mem + sizeof(rp::plan_header));  // 64-byte header: aligned
    // Validate every op before measuring, so the replay loop can trust them.
    // The flags are mapped, not malloc'd: the malloc rows measure a library
    // from the state a program starts in, and a block allocated and freed
    // here shifted Lea's layout enough to move its peak by 4 % (a 0.6 MB
    // gap to the real run of the same program on 19 MB).
    const std::size_t flag_bytes = std::max<std::size_t>(1, std::size_t(p.header.slots));
    void* flag_memory = ::mmap(nullptr, flag_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (flag_memory == MAP_FAILED) die(std::string("cannot map the slot flags: ") + std::strerror(errno));
    mapped_flags filled{static_cast<unsigned char*>(flag_memory), std::size_t(p.header.slots)};
    for (std::uint64_t i = 0; i < p.header.ops; ++i)
        if (const std::string why = rp::check_op(p.ops[i], filled); !why.empty())
            die(std::string("bad replay plan '") + path + "': op " + std::to_string(i) + ": " + why);
    ::munmap(flag_memory, flag_bytes);
    return p;
}

// One live object of the replay.
struct slot_entry {
    void* p;
    std::uint64_t size : 56;
    std::uint64_t align_log2 : 8;
};
static_assert(sizeof(slot_entry) == 16);

// ---------------------------------------------------------------------------
// Allocators. alloc/realloc return nullptr on failure.
// ---------------------------------------------------------------------------

constexpr std::uint64_t align_bytes(unsigned log2) noexcept { return log2 ? std::uint64_t(1) << log2 : 0; }

struct malloc_backend {
    static constexpr bool is_heap = false;
    std::uint64_t capped = 0;
    void* alloc(std::uint64_t n, unsigned a, const void*) noexcept {
        if (a > 4) {
            // Beyond malloc's 16. Not aligned_alloc, whose size C11 wanted a
            // multiple of the alignment: rounding 100 bytes up to 4096 made
            // the replay hold far more than the program did.
            void* p = nullptr;
            return ::posix_memalign(&p, std::size_t(align_bytes(a)), std::size_t(n)) == 0 ? p : nullptr;
        }
        return std::malloc(n);
    }
    void free(void* p, std::uint64_t, unsigned) noexcept { std::free(p); }
    void* realloc(void* p, std::uint64_t old_n, unsigned old_a, std::uint64_t n, unsigned a) noexcept {
        if (a <= 4 && old_a <= 4 && n != 0) return std::realloc(p, n);
        // realloc(p, 0) frees on glibc; an over-aligned block must stay aligned.
        void* q = alloc(n, a, p);
        if (!q && n) return nullptr;
        if (q) std::memcpy(q, p, std::min(old_n, n));
        std::free(p);
        return q;
    }
};

struct pmr_backend {
    static constexpr bool is_heap = false;
    std::uint64_t capped = 0;
    std::pmr::unsynchronized_pool_resource pool{std::pmr::new_delete_resource()};
    static std::size_t al(unsigned a) noexcept { return a ? std::size_t(1) << a : alignof(std::max_align_t); }
    void* alloc(std::uint64_t n, unsigned a, const void*) noexcept {
        try {
            return pool.allocate(n, al(a));
        } catch (...) {
            return nullptr;
        }
    }
    void free(void* p, std::uint64_t n, unsigned a) noexcept { pool.deallocate(p, n, al(a)); }
    void* realloc(void* p, std::uint64_t old_n, unsigned old_a, std::uint64_t n, unsigned a) noexcept {
        void* q = alloc(n, a, p);
        if (!q) return nullptr;
        std::memcpy(q, p, std::min(old_n, n));
        free(p, old_n, old_a);
        return q;
    }
};

template <class Heap>
struct heap_backend {
    static constexpr bool is_heap = true;
    static constexpr unsigned max_align_log2 = 12;  // the heaps honour alignments up to 4096
    std::uint64_t capped = 0;                       // alignments above that, replayed as 4096
    Heap heap;
    std::size_t al(unsigned a) noexcept {
        if (a > max_align_log2) {
            ++capped;
            a = max_align_log2;
        }
        return std::size_t(align_bytes(a));
    }
    static std::size_t al_quiet(unsigned a) noexcept { return std::size_t(align_bytes(std::min(a, max_align_log2))); }
    void* alloc(std::uint64_t n, unsigned a, const void* hint) noexcept {
        return heap.try_allocate(allotheque::request{n, hint, al(a)});
    }
    void free(void* p, std::uint64_t n, unsigned a) noexcept {
        heap.deallocate(p, allotheque::request{n, nullptr, al_quiet(a)});
    }
    void* realloc(void* p, std::uint64_t old_n, unsigned old_a, std::uint64_t n, unsigned a) noexcept {
        void* q = alloc(n, a, p);  // near the old block
        if (!q) return nullptr;
        std::memcpy(q, p, std::min(old_n, n));
        free(p, old_n, old_a);
        return q;
    }
};

// ---------------------------------------------------------------------------
// The replay
// ---------------------------------------------------------------------------

std::size_t page_bytes = 4096;
std::uint64_t touch_limit = rp::default_touch_limit;  // the plan's

// What a program does with a new object: writes its header and its end, and
// something on every page of its first touch_limit bytes (replay_plan.hpp:
// the rest of a huge buffer is taken to be unused, as it costs nothing until
// written). The compiler must not drop the stores.
inline void touch(void* p, std::uint64_t n, std::uint32_t tag) noexcept {
    if (n == 0) return;
    auto* b = static_cast<unsigned char*>(p);
    const std::size_t line = std::size_t(std::min<std::uint64_t>(n, 64));
    std::memset(b, int(tag & 0xff), line);
    std::memset(b + (n - line), int(tag & 0xff), line);
    const std::uint64_t end = std::min(n, touch_limit);
    for (std::uint64_t off = page_bytes; off < end; off += page_bytes) b[off] = static_cast<unsigned char>(tag);
    __asm__ __volatile__("" : : "r"(b) : "memory");
}

struct result {
    double seconds = 0;
    memory_probe mem;
    std::size_t peak_delta = 0;
    std::uint64_t sink = 0;
    std::uint64_t heap_peak_os = 0, heap_os_before = 0, heap_metadata = 0;
    std::uint64_t capped = 0;
};

template <class B>
result replay(B& b, const loaded_plan& plan, slot_entry* slots, const char* name) {
    result r;
    const rp::plan_op* const ops = plan.ops;
    const std::uint64_t n = plan.header.ops;
    if constexpr (B::is_heap) r.heap_os_before = b.heap.stats().os_bytes;

    r.mem.start();
    std::uint64_t sink = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (std::uint64_t i = 0; i < n; ++i) {
        const rp::plan_op& o = ops[i];
        switch (o.kind) {
            case rp::op_kind::alloc: {
                const void* hint = nullptr;
                if (o.other != rp::no_slot) {
                    const slot_entry& h = slots[o.other];
                    hint = h.p;
                    if (h.p && h.size) sink += *static_cast<const volatile unsigned char*>(h.p);
                }
                void* p = b.alloc(o.size, o.align_log2, hint);
                if (!p && o.size)
                    die(std::string(name) + ": allocation of " + std::to_string(o.size) + " bytes failed at op " +
                        std::to_string(i) + " (out of memory)");
                touch(p, o.size, std::uint32_t(i));
                slots[o.slot] = slot_entry{p, o.size, o.align_log2};
                break;
            }
            case rp::op_kind::free: {
                slot_entry& s = slots[o.slot];
                b.free(s.p, s.size, unsigned(s.align_log2));
                s.p = nullptr;
                break;
            }
            case rp::op_kind::realloc: {
                slot_entry& s = slots[o.slot];
                void* p = b.realloc(s.p, s.size, unsigned(s.align_log2), o.size, o.align_log2);
                if (!p && o.size)
                    die(std::string(name) + ": reallocation to " + std::to_string(o.size) + " bytes failed at op " +
                        std::to_string(i) + " (out of memory)");
                touch(p, o.size, std::uint32_t(i));
                s.p = nullptr;
                slots[o.other] = slot_entry{p, o.size, o.align_log2};
                break;
            }
        }
    }
    const auto t1 = std::chrono::steady_clock::now();
    r.peak_delta = r.mem.peak_delta();
    r.seconds = std::chrono::duration<double>(t1 - t0).count();
    r.sink = sink;
    r.capped = b.capped;
    if constexpr (B::is_heap) {
        const auto st = b.heap.stats();
        r.heap_peak_os = st.peak_os_bytes;
        r.heap_metadata = st.metadata_bytes;
    }
    return r;
}

void print(const result& r, const loaded_plan& plan, std::string_view name, std::string_view library) {
    const std::uint64_t req = plan.header.peak_requested_bytes;
    // Fragmentation is measured against what the replay writes: an object's
    // untouched tail is not resident under any allocator.
    const std::uint64_t data = plan.header.peak_touched_bytes;
    const std::uint64_t delta = r.peak_delta;
    std::string line = "{\"allocator\": \"" + std::string(name) + "\"";
    char buf[512];
    if (!library.empty()) line += ", \"malloc_library\": \"" + std::string(library) + "\"";
    if (library == "allotheque") line += ", \"malloc_heap\": \"" + std::string(name.substr(7)) + "\"";
    std::snprintf(buf, sizeof buf,
                  ", \"ops\": %llu, \"objects\": %llu, \"slots\": %llu, \"seconds\": %.6f"
                  ", \"peak_requested_bytes\": %llu, \"rss_before_bytes\": %llu, \"peak_rss_delta_bytes\": %llu"
                  ", \"peak_touched_bytes\": %llu, \"touch_limit\": %.0f",
                  (unsigned long long)plan.header.ops, (unsigned long long)plan.header.objects,
                  (unsigned long long)plan.header.slots, r.seconds, (unsigned long long)req,
                  (unsigned long long)r.mem.rss_before, (unsigned long long)delta, (unsigned long long)data,
                  touch_limit == rp::touch_all ? -1.0 : double(touch_limit));
    line += buf;
    if (data) {
        std::snprintf(buf, sizeof buf, ", \"fragmentation\": %.6f", (double(delta) - double(data)) / double(data));
        line += buf;
    } else {
        line += ", \"fragmentation\": null";
    }
    std::snprintf(buf, sizeof buf, ", \"hwm_reset\": %s, \"alignment_capped\": %llu, \"checksum\": %llu",
                  r.mem.hwm_reset ? "true" : "false", (unsigned long long)r.capped, (unsigned long long)r.sink);
    line += buf;
    if (!library.empty() || name == "pmr") {
        // not a heap: nothing more
    } else {
        std::snprintf(buf, sizeof buf,
                      ", \"heap_peak_os_bytes\": %llu, \"heap_os_bytes_before\": %llu, \"heap_metadata_bytes\": %llu",
                      (unsigned long long)r.heap_peak_os, (unsigned long long)r.heap_os_before,
                      (unsigned long long)r.heap_metadata);
        line += buf;
    }
    line += "}\n";
    std::fputs(line.c_str(), stdout);
    std::fflush(stdout);
}

template <class B>
int run(const loaded_plan& plan, slot_entry* slots, const char* name, const char* library) {
    B b;  // constructed (and its fixed tables touched) before the peak is reset, as in the bench
    const result r = replay(b, plan, slots, name);
    print(r, plan, name, library);
    return 0;
}

// A malloc-<heap> row measures the allotheque malloc named <heap> as the
// program would run it: the malloc this process calls must be the one whose
// library reports that name (a library preloaded but shadowed, or another
// allotheque malloc, would be measured under the wrong name).
void check_allotheque_malloc(const char* heap) {
    // Weak (<allotheque/malloc_stats.h>): null unless an allotheque malloc is loaded.
    const auto name = &allotheque_malloc_heap_name;
    if (!name)
        die(std::string("allocator 'malloc-") + heap + "' requested but no allotheque malloc is loaded (the active malloc is '" +
            malloc_library() + "'; run with LD_PRELOAD of liballotheque_malloc_" + heap + ".so)");
    Dl_info m{}, n{};
    void* const malloc_fn = ::dlsym(RTLD_DEFAULT, "malloc");
    if (!malloc_fn || !::dladdr(malloc_fn, &m) || !::dladdr(reinterpret_cast<void*>(name), &n) || !m.dli_fname ||
        !n.dli_fname || std::strcmp(m.dli_fname, n.dli_fname) != 0)
        die(std::string("allocator 'malloc-") + heap + "' requested but malloc is not served by the allotheque library " +
            (n.dli_fname ? n.dli_fname : "?") + " (it comes from " + (m.dli_fname ? m.dli_fname : "?") + ")");
    if (const char* got = name(); !got || std::strcmp(heap, got) != 0)
        die(std::string("allocator 'malloc-") + heap + "' requested but the preloaded allotheque malloc is '" +
            (got ? got : "?") + "' (" + n.dli_fname + ")");
}

int usage() {
    std::fputs("usage: allotheque-replay-worker --allocator NAME PLAN\n"
               "  NAME: glibc jemalloc mimalloc tcmalloc malloc-<heap> (an allotheque malloc preloaded, whose\n"
               "        allotheque_malloc_heap_name() is <heap>), pmr, or a header-only heap: segregated kingsley\n"
               "        quickfit velox medius defero lea lea_deferred kingsley_coalescing\n"
               "  PLAN: a replay plan written by `allotheque-trace replay` (not a trace); it says how\n"
               "        much of each object to write (replay --touch-limit)\n",
               stderr);
    return 2;
}

} // namespace

int main(int argc, char** argv) {
    // Views of argv, not strings: before the measurement the worker leaves
    // the malloc under test as untouched as a program's start-up does (a
    // plan path past the short-string buffer was a live block the traced
    // program never had).
    const char* name_arg = nullptr;
    const char* path = nullptr;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--allocator" && i + 1 < argc) name_arg = argv[++i];
        else if (a.rfind("--allocator=", 0) == 0) name_arg = argv[i] + 12;
        else if (a == "--help" || a == "-h") return usage(), 0;
        else if (!a.empty() && a[0] == '-') return usage();
        else if (!path) path = argv[i];
        else return usage();
    }
    if (!name_arg || !*name_arg || !path || !*path) return usage();
    const std::string_view name = name_arg;

    const bool is_allotheque_malloc = name.rfind("malloc-", 0) == 0 && name.size() > 7;
    const bool is_malloc =
        is_allotheque_malloc || name == "glibc" || name == "jemalloc" || name == "mimalloc" || name == "tcmalloc";
    static const char* const heaps[] = {"pmr",    "segregated", "kingsley", "quickfit",     "velox",
                                        "medius", "defero",     "lea",      "lea_deferred", "kingsley_coalescing"};
    if (!is_malloc && std::find_if(std::begin(heaps), std::end(heaps), [&](const char* h) { return name == h; }) ==
                          std::end(heaps)) {
        std::fprintf(stderr, "%s: unknown allocator '%s'\n", me, name_arg);
        return usage();
    }
    const char* library = "";
    if (is_allotheque_malloc) {
        library = "allotheque";
        check_allotheque_malloc(name_arg + 7);
    } else if (is_malloc) {
        library = malloc_library();
        if (name != library)
            die(std::string("allocator '") + name_arg + "' requested but the active malloc is '" + library +
                "' (run with LD_PRELOAD of lib" + name_arg + ")");
    }
    if (const long ps = ::sysconf(_SC_PAGESIZE); ps > 0) page_bytes = std::size_t(ps);

    const loaded_plan plan = load_plan(path);
    touch_limit = plan.header.touch_limit;
    // The replay writes every page it gets: a trace whose live bytes exceed
    // this machine's memory would only summon the OOM killer (some mallocs
    // hand out address space they cannot back).
    if (const std::size_t phys = allotheque::tools::physical_memory_bytes();
        phys && plan.header.peak_requested_bytes > phys)
        die("the plan's peak of " + std::to_string(plan.header.peak_requested_bytes) +
            " live bytes exceeds this machine's memory (" + std::to_string(phys) + " bytes)");
    auto* slots = static_cast<slot_entry*>(map_populated(std::size_t(plan.header.slots) * sizeof(slot_entry)));

    using namespace allotheque;
    const char* const n = name_arg;
    if (is_malloc) return run<malloc_backend>(plan, slots, n, library);
    if (name == "pmr") return run<pmr_backend>(plan, slots, n, library);
    if (name == "segregated") return run<heap_backend<segregated_heap<>>>(plan, slots, n, library);
    if (name == "kingsley") return run<heap_backend<kingsley_heap<>>>(plan, slots, n, library);
    if (name == "quickfit") return run<heap_backend<quickfit_heap<>>>(plan, slots, n, library);
    if (name == "velox") return run<heap_backend<velox_heap<>>>(plan, slots, n, library);
    if (name == "medius") return run<heap_backend<medius_heap<>>>(plan, slots, n, library);
    if (name == "defero") return run<heap_backend<defero_heap<>>>(plan, slots, n, library);
    if (name == "lea") return run<heap_backend<lea_heap<>>>(plan, slots, n, library);
    if (name == "lea_deferred") return run<heap_backend<lea_deferred_heap<>>>(plan, slots, n, library);
    return run<heap_backend<kingsley_coalescing_heap<>>>(plan, slots, n, library);
}
