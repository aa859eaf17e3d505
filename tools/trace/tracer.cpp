// liballotheque_trace.so: an LD_PRELOAD tracer that records every call of the
// malloc family and of the C++ operator new/delete family into a trace file
// (include/allotheque/trace/format.hpp), and forwards the call to glibc's
// __libc_* functions (no dlsym: those are exported by every glibc).
//
//   ALLOTHEQUE_TRACE=path   the trace file (default: allotheque.<pid>.trace in
//                           the working directory; made absolute at start).
//                           It is created with O_EXCL; if the name exists (a
//                           child exec'd with the same environment, say) the
//                           tracer uses path.<pid>, then path.<pid>.<k>.
//
// Recording. Each thread appends its events, delta-encoded with encode_event,
// to its own 64 KiB buffer (mmap'd, never malloc'd), reached through an
// initial-exec TLS pointer. The fast path has no lock and no atomic
// read-modify-write: two plain stores of the buffer's `busy` byte, one load of
// the global `active` flag, rdtsc, the varints, and one release store of the
// buffer's `committed` word ((events << 32) | bytes). A full buffer is written
// as one BLK1 record with a single write(2), under the file lock, which also
// orders the global block sequence number.
//
// Memory bound: one 64 KiB buffer per thread that is alive and has allocated
// since the tracer started, plus the control data. A thread's buffer is
// flushed and put on a free list when the thread exits (pthread key
// destructor) and is reused by the next new thread, so the tracer's memory is
// 64 KiB x (peak number of simultaneously live allocating threads); buffers
// are never unmapped. Events a thread makes after its key destructor has run
// (other TLS destructors, glibc's thread teardown) borrow a buffer for the
// one event and give it back at once (a one-event block).
//
// Exit. A library destructor (run by _dl_fini, after the program's own static
// destructors and atexit handlers) takes the file lock and clears `active`;
// then it makes every other thread's view of memory current with
// membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) and waits until no buffer is
// `busy` (bounded: 200 ms per buffer). An owner sets `busy` before it reads
// `active` and clears it after publishing `committed`, so after that wait no
// thread can still be adding an event that the destructor would miss: every
// later event sees `active` false and is counted in `dropped` (those after the
// END record is written are counted nowhere, there being nowhere to write
// them). The destructor then writes each buffer's committed events as a block,
// then MAPS and END. An owner flushes its own buffer only under the same lock
// and only while `active` holds, so no event is ever written twice. Without
// membarrier (kernel < 4.14, seccomp) the destructor uses a full fence: still
// memory-safe (it reads only committed bytes, which owners never rewrite
// outside the lock), but an event started at the very moment of exit may be
// lost uncounted. _exit and _Exit are interposed too (dash, for one, always
// leaves through _exit) and finish the trace the same way before ending the
// process with exit_group, except in a vfork child (getpid() differs from
// the recorded pid: that memory is the parent's). A process killed by a
// signal leaves a trace without END: readers report it as truncated, and
// allow_truncated reads what was flushed. One that execs finishes its trace
// too, and when the new program traces to the same path, renames it
// path.<pid>.exec<k> so that the new program's trace gets the name (see
// exec_begin).
//
// Fork (pthread_atfork). prepare: flush the forking thread's buffer and keep
// the file lock. parent: release it. child: the other threads' buffers hold
// the parent's events and the parent writes them; the child discards them all
// (they go on its free list), closes the parent's file, numbers threads from 0
// again and restarts the block sequence and the totals. Its own file,
// path.<childpid>, is created (header, PROC with the fork as time origin,
// MAPS) only when the child first has something to write, so the usual
// fork-then-exec leaves no empty child file: the exec'd image starts its own
// trace (path.<pid>, since path exists).
//
// Re-entrancy. Calls before the tracer is initialised, while it runs its own
// code (a thread-local guard: pthread_setspecific and pthread_atfork may call
// malloc) or from a signal handler that interrupted an event being written,
// are forwarded untraced. The tracer itself never calls malloc. Thread
// cancellation is disabled while the file lock is held (write is a
// cancellation point).
//
// Event details. Times are rdtsc ticks (CLOCK_MONOTONIC ns elsewhere); each
// block records (clock, mono_ns) at its flush for calibration. Reading the
// clock is most of an event's cost (~11 ns of ~13 on this project's VM), so
// while only one thread has allocated, one event in tr::time_sample_period is
// stamped and the others repeat the last stamp (block_flag_sampled_time; the
// reader spreads them between stamps); once a second thread appears, every
// event is stamped, which keeps cross-thread order exact. A free is
// recorded before the memory is released, an allocation after it is obtained,
// so another thread's reuse of the address always comes later in time (a
// moved realloc is stamped after the call: a reuse of its old block by
// another thread within those few nanoseconds would be misordered). The call
// site is __builtin_return_address(0) of the interposed function (a caller's
// tail call shows its own caller). calloc's size is count x size
// (SIZE_MAX on overflow); pvalloc is recorded as valloc of the page-rounded
// size; reallocarray as realloc; aligned ops carry log2 of the alignment
// (rounded up to a power of two, as glibc does), valloc/pvalloc the page's.
// realloc(p, 0) frees p and returns NULL in glibc: recorded as a realloc to
// address 0, not failed. malloc_usable_size and the other malloc functions
// are not interposed (glibc's answer directly).
//
// operator new loops on the new_handler and throws std::bad_alloc; the
// nothrow forms return nullptr. This library is built with -fno-exceptions:
// bad_alloc is thrown by libstdc++'s std::__throw_bad_alloc, and a
// new_handler that throws from inside a nothrow operator new propagates
// instead of turning into nullptr (a documented limitation).
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>

#if __has_include(<bits/functexcept.h>)
#include <bits/functexcept.h>
#define ALLOTHEQUE_THROW_BAD_ALLOC() std::__throw_bad_alloc()
#else
#define ALLOTHEQUE_THROW_BAD_ALLOC() abort()
#endif

#include <allotheque/trace/format.hpp>

#define ALLOTHEQUE_EXPORT __attribute__((visibility("default")))

extern "C" {
void* __libc_malloc(size_t) noexcept;
void __libc_free(void*) noexcept;
void* __libc_calloc(size_t, size_t) noexcept;
void* __libc_realloc(void*, size_t) noexcept;
void* __libc_memalign(size_t, size_t) noexcept;
void* __libc_valloc(size_t) noexcept;
void* __libc_pvalloc(size_t) noexcept;
}

namespace {

namespace tr = allotheque::trace;
using tr::op;

// ---------------------------------------------------------------------------
// Clocks
// ---------------------------------------------------------------------------
std::uint64_t clock_ns(clockid_t id) noexcept {
    timespec ts;
    clock_gettime(id, &ts);
    return std::uint64_t(ts.tv_sec) * 1000000000u + std::uint64_t(ts.tv_nsec);
}
inline std::uint64_t mono_ns() noexcept { return clock_ns(CLOCK_MONOTONIC); }
inline std::uint64_t ticks() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_ia32_rdtsc();
#else
    return mono_ns();
#endif
}

// ---------------------------------------------------------------------------
// Small allocation-free helpers
// ---------------------------------------------------------------------------
void say(const char* a, const char* b = "", const char* c = "", const char* d = "") noexcept {
    const char* parts[] = {"allotheque-trace: ", a, b, c, d, "\n"};
    for (const char* s : parts) {
        size_t n = strlen(s);
        while (n > 0) {
            const ssize_t w = write(2, s, n);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) return;
            s += w;
            n -= size_t(w);
        }
    }
}

// Appends s to dst (capacity cap); false if it does not fit.
bool cat(char* dst, size_t cap, const char* s) noexcept {
    const size_t n = strlen(dst), m = strlen(s);
    if (n + m + 1 > cap) return false;
    memcpy(dst + n, s, m + 1);
    return true;
}
bool cat_uint(char* dst, size_t cap, std::uint64_t v) noexcept {
    char tmp[24];
    char* p = tmp + sizeof tmp;
    *--p = '\0';
    do {
        *--p = char('0' + v % 10);
        v /= 10;
    } while (v);
    return cat(dst, cap, p);
}

bool write_iov(int fd, iovec* iov, int n) noexcept {
    while (n > 0) {
        const ssize_t w = writev(fd, iov, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        if (w == 0) return false;
        size_t done = size_t(w);
        while (n > 0 && done >= iov->iov_len) {
            done -= iov->iov_len;
            ++iov;
            --n;
        }
        if (n > 0) {
            iov->iov_base = static_cast<char*>(iov->iov_base) + done;
            iov->iov_len -= done;
        }
    }
    return true;
}

// A growable byte buffer in mmap'd memory (for PROC and MAPS records).
class scratch {
public:
    scratch() = default;
    scratch(const scratch&) = delete;
    scratch& operator=(const scratch&) = delete;
    ~scratch() {
        if (p_) munmap(p_, cap_);
    }
    std::byte* data() const noexcept { return p_; }
    size_t size() const noexcept { return len_; }
    void shrink(size_t n) noexcept {
        if (n < len_) len_ = n;
    }
    bool reserve(size_t extra) noexcept {
        if (len_ + extra <= cap_) return true;
        size_t cap = cap_ ? cap_ : 64 * 1024;
        while (cap < len_ + extra) cap *= 2;
        void* q = mmap(nullptr, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (q == MAP_FAILED) return false;
        if (p_) {
            memcpy(q, p_, len_);
            munmap(p_, cap_);
        }
        p_ = static_cast<std::byte*>(q);
        cap_ = cap;
        return true;
    }
    bool append(const void* s, size_t n) noexcept {
        if (!reserve(n)) return false;
        memcpy(p_ + len_, s, n);
        len_ += n;
        return true;
    }
    bool append_u32(std::uint32_t v) noexcept { return append(&v, sizeof v); }
    // The whole file, read with read(2) (a /proc file has no usable size).
    bool append_file(const char* path, size_t max) noexcept {
        const int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) return false;
        const size_t start = len_;
        bool ok = true;
        for (;;) {
            if (!reserve(16 * 1024)) {
                ok = false;
                break;
            }
            const ssize_t r = read(fd, p_ + len_, cap_ - len_);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) {
                ok = false;
                break;
            }
            if (r == 0) break;
            len_ += size_t(r);
            if (len_ - start >= max) {
                len_ = start + max;
                break;
            }
        }
        close(fd);
        return ok;
    }

private:
    std::byte* p_ = nullptr;
    size_t cap_ = 0, len_ = 0;
};

// ---------------------------------------------------------------------------
// Per-thread buffers
// ---------------------------------------------------------------------------
constexpr size_t buffer_bytes = 64 * 1024;
constexpr size_t control_bytes = 128;                                 // struct tbuf
constexpr size_t record_offset = control_bytes;                       // record header
constexpr size_t block_offset = record_offset + tr::record_header_bytes;  // block header
constexpr size_t data_offset = block_offset + tr::block_header::bytes;    // events

struct tbuf {
    // Owner only (written on the fast path).
    std::byte* pos;                     // next event byte
    std::byte* limit;                   // an event may start at or before this
    std::uint32_t events;               // events in the buffer
    std::atomic<std::uint8_t> busy;     // the owner is adding an event
    std::uint8_t unstamped_left;        // events before the next stamped one
    tr::delta_state state;              // after the last event
    // Published by the owner, read by the exit flush.
    std::atomic<std::uint64_t> committed;  // (events << 32) | bytes after data_offset
    // Under the file lock.
    tr::delta_state base;               // delta state at the start of the block
    std::uint32_t thread, os_tid;
    tbuf* next_all;                     // every buffer ever mapped
    tbuf* next_free;                    // buffers without an owner

    std::byte* bytes() noexcept { return reinterpret_cast<std::byte*>(this); }
    std::byte* data() noexcept { return bytes() + data_offset; }
    void reset(const tr::delta_state& s) noexcept {
        pos = data();
        limit = bytes() + buffer_bytes - tr::max_event_bytes;
        events = 0;
        unstamped_left = 0;  // a block's first event is always stamped
        state = s;
        base = s;
        committed.store(0, std::memory_order_release);
    }
};
static_assert(sizeof(tbuf) <= control_bytes);

struct tls_state {
    tbuf* buf;                 // null: not recording on the fast path
    std::uint32_t thread_plus1;  // 0: no number yet
    std::uint8_t guard;        // inside the tracer: forward untraced
    std::uint8_t done;         // the thread's key destructor has run
};
constinit thread_local tls_state tls __attribute__((tls_model("initial-exec"))) = {nullptr, 0, 0, 0};

// ---------------------------------------------------------------------------
// Global state. `active` is read on the fast path; the rest is under `lock`.
// ---------------------------------------------------------------------------
std::atomic<bool> active{false};
std::atomic<std::uint64_t> dropped{0};
std::atomic<bool> ended{false};  // END written: drops are no longer counted
pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

int out_fd = -1;
bool file_pending = false;       // the fork child's file is created on first write
dev_t out_dev = 0;
ino_t out_ino = 0;
char base_path[PATH_MAX];        // the requested path, absolute
char out_path[PATH_MAX + 64];    // the file this process writes (base_path or a variant)
char lib_name[256];              // this library's file name (liballotheque_trace.so), for exec
tr::process_header proc{};       // origin of this process's time axis
std::uint64_t sequence = 0, events_written = 0, threads_seen = 0;
// Set (under the lock) when a second thread gets a buffer: from then on every
// event is stamped. Before, only one in tr::time_sample_period is. A thread
// that reuses memory another thread freed sees this flag, because the free
// and the reuse synchronise inside malloc, so its events are stamped exactly.
std::atomic<bool> many_threads{false};
tbuf* all_buffers = nullptr;
tbuf* free_buffers = nullptr;
tbuf* fork_saved = nullptr;      // the forking thread's buffer, between prepare and parent
pthread_key_t thread_key;
bool have_membarrier = false;

// The file lock. write(2) is a cancellation point: a thread cancelled inside
// a flush would die holding the lock, so cancellation waits while it is held.
struct lock_guard {
    int cancel_state = 0;
    lock_guard() noexcept {
        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
        pthread_mutex_lock(&lock);
    }
    ~lock_guard() {
        pthread_mutex_unlock(&lock);
        pthread_setcancelstate(cancel_state, nullptr);
    }
    lock_guard(const lock_guard&) = delete;
    lock_guard& operator=(const lock_guard&) = delete;
};
int fork_cancel_state = 0;  // the forking thread's, from prepare to parent/child

// Tracing stops for good (an I/O error): no END record, so a reader sees a
// truncated trace rather than a silently incomplete one.
void fail(const char* what, const char* detail = "") noexcept {
    active.store(false, std::memory_order_relaxed);
    if (out_fd >= 0) close(out_fd);
    out_fd = -1;
    file_pending = false;
    say(what, detail, "; tracing stopped");
}

// The file is still ours (a program may close our descriptor and reuse its
// number: then we must not write into its file).
bool file_ok() noexcept {
    struct stat st;
    if (out_fd < 0 || fstat(out_fd, &st) != 0 || st.st_dev != out_dev || st.st_ino != out_ino) {
        fail("the trace file descriptor was closed or replaced by the program");
        return false;
    }
    return true;
}

bool write_record(tr::record_type type, const std::byte* payload, size_t size) noexcept {
    if (size > tr::max_payload_bytes) size = tr::max_payload_bytes;
    std::byte h[tr::record_header_bytes];
    tr::make_record_header(h, type, payload, std::uint32_t(size));
    iovec iov[2] = {{h, sizeof h}, {const_cast<std::byte*>(payload), size}};
    if (!write_iov(out_fd, iov, 2)) {
        fail("cannot write the trace: ", strerror(errno));
        return false;
    }
    return true;
}

bool write_maps() noexcept {
    scratch s;
    if (!s.append_file("/proc/self/maps", tr::max_payload_bytes)) return true;  // not fatal: no symbols
    return write_record(tr::record_type::maps, s.data(), s.size());
}

// Creates the file and writes header, PROC and MAPS. Under the lock.
bool create_file(bool fork_child) noexcept {
    char path[PATH_MAX + 64];
    int fd = -1;
    for (int k = fork_child ? 1 : 0; k < 100 && fd < 0; ++k) {
        path[0] = '\0';
        if (!cat(path, sizeof path, base_path)) break;
        if (k >= 1 && !(cat(path, sizeof path, ".") && cat_uint(path, sizeof path, std::uint64_t(getpid())))) break;
        if (k >= 2 && !(cat(path, sizeof path, ".") && cat_uint(path, sizeof path, std::uint64_t(k - 1)))) break;
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST) {
            say("cannot create the trace file ", path, ": ", strerror(errno));
            return false;
        }
    }
    if (fd < 0) {
        say("cannot create the trace file ", base_path, " (all names taken)");
        return false;
    }
    // Out of the way of a program that counts on low descriptor numbers.
    const int high = fcntl(fd, F_DUPFD_CLOEXEC, 100);
    if (high >= 0) {
        close(fd);
        fd = high;
    }
    struct stat st;
    fstat(fd, &st);
    out_fd = fd;
    memcpy(out_path, path, sizeof out_path);
    out_dev = st.st_dev;
    out_ino = st.st_ino;

    std::byte fh[tr::file_header_bytes];
    tr::make_file_header(fh);
    iovec iov[1] = {{fh, sizeof fh}};
    if (!write_iov(out_fd, iov, 1)) {
        fail("cannot write the trace: ", strerror(errno));
        return false;
    }
    scratch p;
    bool ok = p.append(&proc, sizeof proc);
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe);
    if (n < 0) n = 0;
    ok = ok && p.append_u32(std::uint32_t(n)) && p.append(exe, size_t(n));
    scratch cmd;
    cmd.append_file("/proc/self/cmdline", 1u << 24);
    size_t cn = cmd.size();
    if (cn > 0 && cmd.data()[cn - 1] == std::byte{0}) --cn;  // no trailing separator
    ok = ok && p.append_u32(std::uint32_t(cn)) && (cn == 0 || p.append(cmd.data(), cn));
    if (!ok) {
        fail("out of memory for the process record");
        return false;
    }
    return write_record(tr::record_type::process, p.data(), p.size()) && write_maps();
}

bool ensure_file() noexcept {
    if (out_fd >= 0) return file_ok();
    if (!file_pending) return false;
    file_pending = false;
    return create_file(true);
}

// Writes the first `bytes`/`events` of b as a block. Under the lock, `active`.
void write_block(tbuf* b, std::uint32_t bytes, std::uint32_t events) noexcept {
    if (!ensure_file()) {
        dropped.fetch_add(events, std::memory_order_relaxed);
        return;
    }
    tr::block_header h;
    h.thread = b->thread;
    h.os_tid = b->os_tid;
    h.events = events;
    h.flags = tr::block_flag_sampled_time;
    h.base_time = b->base.time;
    h.base_address = b->base.address;
    h.base_site = b->base.site;
    h.clock = ticks();
    h.mono_ns = mono_ns();
    h.sequence = sequence;
    std::byte* payload = b->bytes() + block_offset;
    memcpy(payload, &h, sizeof h);
    const std::uint32_t size = std::uint32_t(tr::block_header::bytes + bytes);
    std::byte rh[tr::record_header_bytes];
    tr::make_record_header(rh, tr::record_type::block, payload, size);
    memcpy(b->bytes() + record_offset, rh, sizeof rh);
    iovec iov[1] = {{b->bytes() + record_offset, tr::record_header_bytes + size}};
    if (!write_iov(out_fd, iov, 1)) {
        dropped.fetch_add(events, std::memory_order_relaxed);
        fail("cannot write the trace: ", strerror(errno));
        return;
    }
    ++sequence;
    events_written += events;
}

// The owner writes out its own buffer and starts a new block. Under the lock.
void flush_own(tbuf* b) noexcept {
    if (b->events && active.load(std::memory_order_relaxed))
        write_block(b, std::uint32_t(b->pos - b->data()), b->events);
    b->reset(b->state);
}

tbuf* new_buffer() noexcept {
    void* m = mmap(nullptr, buffer_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return nullptr;
    tbuf* b = ::new (m) tbuf{};
    b->next_all = all_buffers;
    all_buffers = b;
    return b;
}

// A buffer for the calling thread. Under the lock.
tbuf* acquire(tls_state& t) noexcept {
    tbuf* b = free_buffers;
    if (b) free_buffers = b->next_free;
    else b = new_buffer();
    if (!b) return nullptr;
    b->next_free = nullptr;
    if (!t.thread_plus1) t.thread_plus1 = std::uint32_t(++threads_seen);
    if (threads_seen > 1) many_threads.store(true, std::memory_order_relaxed);
    b->thread = t.thread_plus1 - 1;
    b->os_tid = std::uint32_t(syscall(SYS_gettid));
    b->busy.store(0, std::memory_order_relaxed);
    b->reset(tr::delta_state{});
    return b;
}

void release(tbuf* b) noexcept {
    b->next_free = free_buffers;
    free_buffers = b;
}

// ---------------------------------------------------------------------------
// Recording one event
// ---------------------------------------------------------------------------
struct ev {
    op kind;
    bool failed;
    bool sized;
    std::uint32_t align_log2;
    std::uint64_t address, old_address, size, site;
};

enum class appended { yes, full };

// The fast path. `busy` is set before `active` is read and cleared after
// `committed` is published (see the exit protocol above). Scalars, not an
// `ev`, so that nothing is spilled to the stack on the way.
[[gnu::always_inline]] inline appended append(tbuf* b, op kind, bool failed, bool sized, std::uint32_t align_log2,
                                              std::uint64_t address, std::uint64_t old_address, std::uint64_t size,
                                              std::uint64_t site) noexcept {
    if (b->busy.load(std::memory_order_relaxed)) return appended::yes;  // a signal handler inside an event
    b->busy.store(1, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (__builtin_expect(b->pos > b->limit, 0)) {
        b->busy.store(0, std::memory_order_relaxed);
        return appended::full;
    }
    if (__builtin_expect(!active.load(std::memory_order_relaxed), 0)) {
        b->busy.store(0, std::memory_order_release);
        if (!ended.load(std::memory_order_relaxed)) dropped.fetch_add(1, std::memory_order_relaxed);
        return appended::yes;
    }
    // (A branch-free varint encoder measured slower here: the loop's branches
    // predict well, and computed lengths lengthen the dependency chain.)
    // Sampled time (format.hpp): an unstamped event repeats the last time.
    std::uint64_t now;
    if (b->unstamped_left == 0 || many_threads.load(std::memory_order_relaxed)) {
        now = ticks();
        b->unstamped_left = tr::time_sample_period - 1;
    } else {
        now = b->state.time;
        --b->unstamped_left;
    }
    std::byte* p = tr::encode_event(b->pos, b->state, kind, failed, now, address, old_address, size, align_log2,
                                    sized, site);
    b->pos = p;
    const std::uint32_t n = ++b->events;
    b->committed.store(std::uint64_t(n) << 32 | std::uint64_t(p - b->data()), std::memory_order_release);
    b->busy.store(0, std::memory_order_release);
    return appended::yes;
}

[[gnu::noinline, gnu::cold]] void slow_event(ev e) noexcept {
    tls_state& t = tls;
    if (t.guard) return;                                         // the tracer's own call
    if (!active.load(std::memory_order_relaxed)) return;         // not started, stopped
    t.guard = 1;
    tbuf* b = t.buf;
    t.buf = nullptr;  // a signal handler arriving now goes untraced
    bool fresh = false;
    {
        lock_guard g;
        if (!active.load(std::memory_order_relaxed)) {
            if (b) b->reset(b->state);
            dropped.fetch_add(1, std::memory_order_relaxed);
            b = nullptr;  // not restored: later events take this path and count as dropped
            t.buf = nullptr;
        } else if (b) {
            flush_own(b);
        } else {
            b = acquire(t);
            fresh = b != nullptr;
            if (!b) dropped.fetch_add(1, std::memory_order_relaxed);
        }
    }
    if (!b) {
        t.guard = 0;
        return;
    }
    if (fresh && !t.done) pthread_setspecific(thread_key, b);  // may calloc: still guarded
    t.guard = 0;
    append(b, e.kind, e.failed, e.sized, e.align_log2, e.address, e.old_address, e.size, e.site);
    if (t.done) {  // after the key destructor: a one-event block, buffer returned
        t.guard = 1;
        {
            lock_guard g;
            flush_own(b);
            release(b);
        }
        t.guard = 0;
        return;
    }
    t.buf = b;
}

[[gnu::always_inline]] inline void record(op kind, std::uint64_t address, std::uint64_t size, void* site,
                                          bool failed = false, std::uint32_t align_log2 = 0,
                                          std::uint64_t old_address = 0, bool sized = false) noexcept {
    const auto s = reinterpret_cast<std::uint64_t>(site);
    tbuf* b = tls.buf;
    if (__builtin_expect(b != nullptr, 1) &&
        append(b, kind, failed, sized, align_log2, address, old_address, size, s) == appended::yes)
        return;
    slow_event(ev{kind, failed, sized, align_log2, address, old_address, size, s});
}

inline std::uint64_t addr(const void* p) noexcept { return reinterpret_cast<std::uint64_t>(p); }

// log2 of an alignment, rounded up (glibc rounds a memalign alignment up to a
// power of two); 0 for the default (<= 1).
inline std::uint32_t log2_align(size_t a) noexcept {
    if (a <= 1) return 0;
    const std::uint32_t l = std::uint32_t(64 - __builtin_clzll(std::uint64_t(a - 1)));
    return l > 62 ? 62 : l;
}

std::uint32_t page_log2() noexcept {
    static const std::uint32_t v = log2_align(size_t(sysconf(_SC_PAGESIZE)));
    return v;
}

// ---------------------------------------------------------------------------
// Thread exit, fork, start, exit
// ---------------------------------------------------------------------------
void thread_exit(void*) noexcept {
    tls_state& t = tls;
    t.done = 1;
    tbuf* b = t.buf;
    if (!b) return;
    t.guard = 1;
    t.buf = nullptr;
    {
        lock_guard g;
        flush_own(b);
        release(b);
    }
    t.guard = 0;
}

void before_fork() noexcept {
    tls_state& t = tls;
    t.guard = 1;
    fork_saved = t.buf;
    t.buf = nullptr;
    int cancel_state = 0;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
    pthread_mutex_lock(&lock);
    fork_cancel_state = cancel_state;
    if (fork_saved) flush_own(fork_saved);
}

void after_fork_parent() noexcept {
    tls_state& t = tls;
    const int cancel_state = fork_cancel_state;
    pthread_mutex_unlock(&lock);
    pthread_setcancelstate(cancel_state, nullptr);
    t.buf = fork_saved;
    t.guard = 0;
}

void after_fork_child() noexcept {
    tls_state& t = tls;
    // Every buffer holds the parent's events (the parent writes them): discard.
    free_buffers = nullptr;
    for (tbuf* b = all_buffers; b; b = b->next_all) {
        b->busy.store(0, std::memory_order_relaxed);
        b->reset(tr::delta_state{});
        release(b);
    }
    fork_saved = nullptr;
    t.buf = nullptr;
    t.thread_plus1 = 0;
    t.done = 0;
    if (out_fd >= 0) close(out_fd);  // the parent's file
    out_fd = -1;
    sequence = events_written = threads_seen = 0;
    many_threads.store(false, std::memory_order_relaxed);  // the child has one thread
    dropped.store(0, std::memory_order_relaxed);
    if (active.load(std::memory_order_relaxed)) {
        file_pending = true;
        proc.pid = std::uint32_t(getpid());
        proc.ppid = std::uint32_t(getppid());
        proc.clock = ticks();
        proc.mono_ns = mono_ns();
        proc.real_ns = clock_ns(CLOCK_REALTIME);
        if (have_membarrier)
            have_membarrier = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
    }
    const int cancel_state = fork_cancel_state;
    pthread_mutex_unlock(&lock);
    pthread_setcancelstate(cancel_state, nullptr);
    t.guard = 0;
}

// The absolute trace path for ALLOTHEQUE_TRACE=env (null: unset) in the
// current directory.
bool trace_path(char* out, size_t cap, const char* env) noexcept {
    char path[PATH_MAX];
    path[0] = '\0';
    bool ok = true;
    if (env && *env) {
        ok = cat(path, sizeof path, env);
    } else {
        ok = cat(path, sizeof path, "allotheque.") && cat_uint(path, sizeof path, std::uint64_t(getpid())) &&
             cat(path, sizeof path, ".trace");
    }
    out[0] = '\0';
    if (ok && path[0] != '/') ok = getcwd(out, cap) != nullptr && cat(out, cap, "/");
    return ok && cat(out, cap, path);
}

__attribute__((constructor(101))) void tracer_start() noexcept {
    tls_state& t = tls;
    t.guard = 1;
    page_log2();
    if (!trace_path(base_path, sizeof base_path, getenv("ALLOTHEQUE_TRACE"))) {
        say("trace path too long; not tracing");
        return;
    }
    if (pthread_key_create(&thread_key, &thread_exit) != 0) {
        say("pthread_key_create failed; not tracing");
        return;
    }
    pthread_atfork(&before_fork, &after_fork_parent, &after_fork_child);
    Dl_info self;
    if (dladdr(reinterpret_cast<void*>(&tracer_start), &self) && self.dli_fname) {
        const char* slash = strrchr(self.dli_fname, '/');
        if (!cat(lib_name, sizeof lib_name, slash ? slash + 1 : self.dli_fname)) lib_name[0] = '\0';
    }
    {
        lock_guard g;
        proc.pid = std::uint32_t(getpid());
        proc.ppid = std::uint32_t(getppid());
        proc.clock = ticks();
        proc.mono_ns = mono_ns();
        proc.real_ns = clock_ns(CLOCK_REALTIME);
        if (!create_file(false)) return;
    }
    have_membarrier = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
    active.store(true, std::memory_order_release);
    t.guard = 0;
}

bool write_end() noexcept {
    tr::end_record e;
    e.clock = ticks();
    e.mono_ns = mono_ns();
    e.events = events_written;
    e.dropped = dropped.load(std::memory_order_relaxed);
    e.blocks = sequence;
    e.threads = threads_seen;
    if (!write_record(tr::record_type::end, reinterpret_cast<const std::byte*>(&e), sizeof e)) return false;
    ended.store(true, std::memory_order_relaxed);
    return true;
}

// Waits until b's owner is between events (bounded: a stopped owner must not
// hang the exit).
void wait_idle(tbuf* b) noexcept {
    if (!b->busy.load(std::memory_order_acquire)) return;
    const std::uint64_t deadline = mono_ns() + 200'000'000;
    for (unsigned i = 0; b->busy.load(std::memory_order_acquire); ++i) {
        if (i < 1000) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        } else {
            sched_yield();
            if (mono_ns() > deadline) return;
        }
    }
}

__attribute__((destructor)) void tracer_stop() noexcept {
    tls_state& t = tls;
    t.guard = 1;
    tbuf* own = t.buf;
    t.buf = nullptr;  // this thread stays guarded: its later calls go untraced
    lock_guard g;
    if (!active.load(std::memory_order_relaxed)) return;
    active.store(false, std::memory_order_seq_cst);
    if (have_membarrier) syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
    else std::atomic_thread_fence(std::memory_order_seq_cst);
    for (tbuf* b = all_buffers; b; b = b->next_all) {
        if (b != own) wait_idle(b);
        const std::uint64_t c = b->committed.load(std::memory_order_acquire);
        if (const auto events = std::uint32_t(c >> 32)) {
            write_block(b, std::uint32_t(c), events);
            if (out_fd < 0) return;  // write error: no END record
        }
        b->committed.store(0, std::memory_order_relaxed);
    }
    if (!ensure_file()) return;
    if (!write_maps() || !write_end()) return;
    close(out_fd);
    out_fd = -1;
}

// ---------------------------------------------------------------------------
// exec: the trace's name goes to the new image
// ---------------------------------------------------------------------------
// A wrapper (a pyenv shim, `#!/usr/bin/env python3`, a launcher script) runs
// for a moment and execs the program that does the work. Left alone, the
// wrapper's trace would keep the name `record` reports and summarises, without
// an END record, and the program's trace would be a FILE.<pid> among the
// wrapper's helpers. So before an exec the trace is finished (every buffer,
// MAPS, END), and when the new image will trace to the same path (same
// ALLOTHEQUE_TRACE, LD_PRELOAD still names this library) it is renamed
// FILE.<pid>.exec<k>, freeing the name for the new image's tracer. The file lock is held until exec
// returns, so no other thread writes after END. A failed exec undoes it: the
// name is taken back and, when no other thread owns a buffer, the MAPS and END
// records are cut off and recording goes on; otherwise (other threads' buffers
// cannot be reclaimed safely) the trace stays finished and later events are
// lost. (A vfork child, such as posix_spawn's, is left alone: it shares the
// parent's memory, and its new image traces to FILE.<pid> as a fork child's.)
struct exec_prep {
    bool entered = false;   // guard and lock taken
    bool finished = false;  // END written
    bool moved = false;     // renamed to `moved_to`
    bool stopped = false;   // `active` cleared here
    bool resumable = false;
    off_t end_offset = 0;   // where the MAPS and END records begin
    int cancel_state = 0;
    tbuf* own = nullptr;
    char moved_to[PATH_MAX + 96];
};

const char* env_value(char* const* envp, const char* name_eq) noexcept {
    if (!envp) return nullptr;
    const size_t n = strlen(name_eq);
    for (; *envp; ++envp)
        if (strncmp(*envp, name_eq, n) == 0) return *envp + n;
    return nullptr;
}

bool rename_noreplace(const char* from, const char* to) noexcept {
    if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0) return true;
    if (errno != EINVAL && errno != ENOSYS) return false;
    // A file system without RENAME_NOREPLACE: link() also refuses to replace.
    if (link(from, to) != 0) return false;
    unlink(from);
    return true;
}

bool is_free(const tbuf* b) noexcept {
    for (const tbuf* f = free_buffers; f; f = f->next_free)
        if (f == b) return true;
    return false;
}

void exec_begin(exec_prep& x, char* const* envp) noexcept {
    if (proc.pid != std::uint32_t(getpid())) return;  // a vfork child: the memory is the parent's
    tls_state& t = tls;
    if (t.guard) return;
    x.entered = true;
    t.guard = 1;
    x.own = t.buf;
    t.buf = nullptr;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &x.cancel_state);
    pthread_mutex_lock(&lock);
    if (!active.load(std::memory_order_relaxed)) return;
    // A fork child that has recorded nothing has no file and nothing to hand on.
    if (out_fd < 0 && (!file_pending || !x.own || x.own->events == 0)) return;
    // Whether the new image will trace to this path (then it gets the name);
    // either way this trace is finished: nothing more would be written to it.
    char next[PATH_MAX];
    const char* preload = env_value(envp, "LD_PRELOAD=");
    const bool hand_over = preload && *preload && (!lib_name[0] || strstr(preload, lib_name)) &&
                           trace_path(next, sizeof next, env_value(envp, "ALLOTHEQUE_TRACE=")) &&
                           strcmp(next, base_path) == 0;
    if (x.own) flush_own(x.own);
    if (!ensure_file()) return;
    x.resumable = true;
    x.stopped = true;
    active.store(false, std::memory_order_seq_cst);
    if (have_membarrier) syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
    else std::atomic_thread_fence(std::memory_order_seq_cst);
    for (tbuf* b = all_buffers; b; b = b->next_all) {
        if (b == x.own) continue;
        if (!is_free(b)) x.resumable = false;
        wait_idle(b);
        const std::uint64_t c = b->committed.load(std::memory_order_acquire);
        if (const auto events = std::uint32_t(c >> 32)) {
            write_block(b, std::uint32_t(c), events);
            if (out_fd < 0) return;
        }
        b->committed.store(0, std::memory_order_relaxed);
    }
    x.end_offset = lseek(out_fd, 0, SEEK_CUR);
    if (x.end_offset < 0 || !write_maps() || !write_end()) return;
    x.finished = true;
    for (std::uint64_t k = 1; hand_over && k < 100 && !x.moved; ++k) {
        x.moved_to[0] = '\0';
        if (!(cat(x.moved_to, sizeof x.moved_to, base_path) && cat(x.moved_to, sizeof x.moved_to, ".") &&
              cat_uint(x.moved_to, sizeof x.moved_to, std::uint64_t(getpid())) &&
              cat(x.moved_to, sizeof x.moved_to, ".exec") && cat_uint(x.moved_to, sizeof x.moved_to, k)))
            break;
        x.moved = rename_noreplace(out_path, x.moved_to);
        if (!x.moved && errno != EEXIST) break;
    }
}

// After an exec that returned (failed). Keeps errno.
void exec_end(exec_prep& x) noexcept {
    if (!x.entered) return;
    const int saved = errno;
    if (x.moved && !rename_noreplace(x.moved_to, out_path)) {
        // Another process took the name meanwhile: go on under the new one.
        memcpy(out_path, x.moved_to, sizeof out_path);
    }
    if (x.finished) {
        if (x.resumable && ftruncate(out_fd, x.end_offset) == 0 &&
            lseek(out_fd, x.end_offset, SEEK_SET) == x.end_offset) {
            ended.store(false, std::memory_order_relaxed);
            active.store(true, std::memory_order_release);
        } else {
            close(out_fd);
            out_fd = -1;
        }
    } else if (x.stopped && out_fd >= 0) {
        if (x.resumable) {
            active.store(true, std::memory_order_release);
        } else if (write_maps() && write_end()) {
            close(out_fd);
            out_fd = -1;
        }
    }
    pthread_mutex_unlock(&lock);
    pthread_setcancelstate(x.cancel_state, nullptr);
    tls_state& t = tls;
    t.buf = x.own;
    t.guard = 0;
    errno = saved;
}

// Whether execve(path) can get as far as loading it. Shells try every PATH
// entry in turn; the trace is finished only for one that may run.
bool may_run(const char* path) noexcept {
    struct stat st;
    return path && stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

// glibc's own exec functions call its internal execve, not ours: each one
// used by programs is interposed, forwarding to the next definition.
template <class F>
F next_exec(const char* name) noexcept {
    tls_state& t = tls;
    const std::uint8_t g = t.guard;
    t.guard = 1;  // dlsym may allocate
    void* f = dlsym(RTLD_NEXT, name);
    t.guard = g;
    return reinterpret_cast<F>(f);
}

// operator new: the new_handler loop; one event per call (its final outcome).
template <bool Throw>
inline void* new_impl(size_t n, size_t align, op kind, void* site) {
    for (;;) {
        void* p = align ? __libc_memalign(align, n) : __libc_malloc(n);
        if (p) {
            record(kind, addr(p), n, site, false, log2_align(align));
            return p;
        }
        std::new_handler h = std::get_new_handler();
        if (!h) {
            record(kind, 0, n, site, true, log2_align(align));
            if constexpr (Throw) ALLOTHEQUE_THROW_BAD_ALLOC();
            return nullptr;
        }
        h();
    }
}

inline void delete_impl(void* p, op kind, void* site, size_t size = 0, bool sized = false, size_t align = 0) noexcept {
    record(kind, addr(p), size, site, false, log2_align(align), 0, sized);
    __libc_free(p);
}

} // namespace

// ---------------------------------------------------------------------------
// C entry points
// ---------------------------------------------------------------------------
extern "C" {

ALLOTHEQUE_EXPORT void* malloc(size_t n) noexcept {
    void* p = __libc_malloc(n);
    record(op::malloc_, addr(p), n, __builtin_return_address(0), p == nullptr);
    return p;
}

ALLOTHEQUE_EXPORT void free(void* p) noexcept {
    record(op::free_, addr(p), 0, __builtin_return_address(0));
    __libc_free(p);
}

ALLOTHEQUE_EXPORT void* calloc(size_t count, size_t size) noexcept {
    void* p = __libc_calloc(count, size);
    size_t n;
    if (__builtin_mul_overflow(count, size, &n)) n = SIZE_MAX;
    record(op::calloc_, addr(p), n, __builtin_return_address(0), p == nullptr);
    return p;
}

ALLOTHEQUE_EXPORT void* realloc(void* old, size_t n) noexcept {
    void* p = __libc_realloc(old, n);
    // glibc: realloc(p, 0) frees p and returns NULL; that is not a failure.
    const bool failed = p == nullptr && !(old != nullptr && n == 0);
    record(op::realloc_, addr(p), n, __builtin_return_address(0), failed, 0, addr(old));
    return p;
}

ALLOTHEQUE_EXPORT void* reallocarray(void* old, size_t count, size_t size) noexcept {
    size_t n;
    if (__builtin_mul_overflow(count, size, &n)) {
        record(op::realloc_, 0, SIZE_MAX, __builtin_return_address(0), true, 0, addr(old));
        errno = ENOMEM;
        return nullptr;
    }
    void* p = __libc_realloc(old, n);
    const bool failed = p == nullptr && !(old != nullptr && n == 0);
    record(op::realloc_, addr(p), n, __builtin_return_address(0), failed, 0, addr(old));
    return p;
}

ALLOTHEQUE_EXPORT int posix_memalign(void** out, size_t alignment, size_t n) noexcept {
    if (alignment % sizeof(void*) != 0 || (alignment & (alignment - 1)) != 0 || alignment == 0) {
        record(op::posix_memalign_, 0, n, __builtin_return_address(0), true, log2_align(alignment));
        return EINVAL;
    }
    const int saved = errno;
    void* p = __libc_memalign(alignment, n);
    record(op::posix_memalign_, addr(p), n, __builtin_return_address(0), p == nullptr, log2_align(alignment));
    if (!p) {
        errno = saved;
        return ENOMEM;
    }
    *out = p;
    return 0;
}

// glibc 2.36's aligned_alloc is memalign (no stricter checks); so is this one.
ALLOTHEQUE_EXPORT void* aligned_alloc(size_t alignment, size_t n) noexcept {
    void* p = __libc_memalign(alignment, n);
    record(op::aligned_alloc_, addr(p), n, __builtin_return_address(0), p == nullptr, log2_align(alignment));
    return p;
}

ALLOTHEQUE_EXPORT void* memalign(size_t alignment, size_t n) noexcept {
    void* p = __libc_memalign(alignment, n);
    record(op::memalign_, addr(p), n, __builtin_return_address(0), p == nullptr, log2_align(alignment));
    return p;
}

ALLOTHEQUE_EXPORT void* valloc(size_t n) noexcept {
    void* p = __libc_valloc(n);
    record(op::valloc_, addr(p), n, __builtin_return_address(0), p == nullptr, page_log2());
    return p;
}

// Recorded as valloc of the rounded size (what the program may use).
ALLOTHEQUE_EXPORT void* pvalloc(size_t n) noexcept {
    void* p = __libc_pvalloc(n);
    const size_t page = size_t(1) << page_log2();
    const size_t rounded = n == 0 ? page : (n + page - 1 < n ? SIZE_MAX : (n + page - 1) & ~(page - 1));
    record(op::valloc_, addr(p), rounded, __builtin_return_address(0), p == nullptr, page_log2());
    return p;
}

// The exec family (see exec_begin). execve is the system call itself.
ALLOTHEQUE_EXPORT int execve(const char* path, char* const argv[], char* const envp[]) noexcept {
    exec_prep x;
    if (may_run(path)) exec_begin(x, envp);
    const int r = int(syscall(SYS_execve, path, argv, envp));
    exec_end(x);
    return r;
}

ALLOTHEQUE_EXPORT int execv(const char* path, char* const argv[]) noexcept { return execve(path, argv, environ); }

ALLOTHEQUE_EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) noexcept {
    using fn = int (*)(const char*, char* const[], char* const[]);
    const fn next = next_exec<fn>("execvpe");
    if (!next) {
        errno = ENOSYS;
        return -1;
    }
    exec_prep x;
    exec_begin(x, envp);
    const int r = next(file, argv, envp);
    exec_end(x);
    return r;
}

ALLOTHEQUE_EXPORT int execvp(const char* file, char* const argv[]) noexcept { return execvpe(file, argv, environ); }

ALLOTHEQUE_EXPORT int fexecve(int fd, char* const argv[], char* const envp[]) noexcept {
    using fn = int (*)(int, char* const[], char* const[]);
    const fn next = next_exec<fn>("fexecve");
    if (!next) {
        errno = ENOSYS;
        return -1;
    }
    exec_prep x;
    exec_begin(x, envp);
    const int r = next(fd, argv, envp);
    exec_end(x);
    return r;
}

ALLOTHEQUE_EXPORT int execveat(int dirfd, const char* path, char* const argv[], char* const envp[], int flags) noexcept {
    exec_prep x;
    exec_begin(x, envp);
    const int r = int(syscall(SYS_execveat, dirfd, path, argv, envp, flags));
    exec_end(x);
    return r;
}

// The execl forms: the arguments into an array on the stack, as glibc does.
// Leaves `ap` after the list's terminating null (execle's envp comes next).
#define ALLOTHEQUE_EXEC_ARGS(arg)                                                  \
    size_t n = 1;                                                                  \
    va_list ap;                                                                    \
    va_start(ap, arg);                                                             \
    while (va_arg(ap, char*)) ++n;                                                 \
    va_end(ap);                                                                    \
    char** args = static_cast<char**>(__builtin_alloca((n + 1) * sizeof(char*)));  \
    args[0] = const_cast<char*>(arg);                                              \
    va_start(ap, arg);                                                             \
    for (size_t i = 1; i <= n; ++i) args[i] = va_arg(ap, char*)

ALLOTHEQUE_EXPORT int execl(const char* path, const char* arg, ...) noexcept {
    ALLOTHEQUE_EXEC_ARGS(arg);
    va_end(ap);
    return execve(path, args, environ);
}

ALLOTHEQUE_EXPORT int execlp(const char* file, const char* arg, ...) noexcept {
    ALLOTHEQUE_EXEC_ARGS(arg);
    va_end(ap);
    return execvpe(file, args, environ);
}

ALLOTHEQUE_EXPORT int execle(const char* path, const char* arg, ...) noexcept {
    ALLOTHEQUE_EXEC_ARGS(arg);
    char* const* envp = va_arg(ap, char* const*);
    va_end(ap);
    return execve(path, args, envp);
}
#undef ALLOTHEQUE_EXEC_ARGS

// _exit skips the library destructor; some programs always leave through it
// (dash does). The trace is finished here too, then the process ends the way
// glibc's _exit ends it. A vfork child (it shares our memory, and getpid()
// is not the pid we recorded) must not touch the parent's trace.
ALLOTHEQUE_EXPORT void _exit(int status) {  // (declared without noexcept by glibc)
    if (proc.pid == std::uint32_t(getpid())) tracer_stop();
    for (;;) syscall(SYS_exit_group, status);
}

ALLOTHEQUE_EXPORT void _Exit(int status) noexcept {
    if (proc.pid == std::uint32_t(getpid())) tracer_stop();
    for (;;) syscall(SYS_exit_group, status);
}

} // extern "C"

// ---------------------------------------------------------------------------
// C++ replaceable allocation functions, all forms
// ---------------------------------------------------------------------------
ALLOTHEQUE_EXPORT void* operator new(std::size_t n) {
    return new_impl<true>(n, 0, op::new_, __builtin_return_address(0));
}
ALLOTHEQUE_EXPORT void* operator new[](std::size_t n) {
    return new_impl<true>(n, 0, op::new_array, __builtin_return_address(0));
}
ALLOTHEQUE_EXPORT void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
    return new_impl<false>(n, 0, op::new_, __builtin_return_address(0));
}
ALLOTHEQUE_EXPORT void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
    return new_impl<false>(n, 0, op::new_array, __builtin_return_address(0));
}
ALLOTHEQUE_EXPORT void* operator new(std::size_t n, std::align_val_t a) {
    return new_impl<true>(n, size_t(a), op::new_, __builtin_return_address(0));
}
ALLOTHEQUE_EXPORT void* operator new[](std::size_t n, std::align_val_t a) {
    return new_impl<true>(n, size_t(a), op::new_array, __builtin_return_address(0));
}
ALLOTHEQUE_EXPORT void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
    return new_impl<false>(n, size_t(a), op::new_, __builtin_return_address(0));
}
ALLOTHEQUE_EXPORT void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
    return new_impl<false>(n, size_t(a), op::new_array, __builtin_return_address(0));
}

ALLOTHEQUE_EXPORT void operator delete(void* p) noexcept { delete_impl(p, op::delete_, __builtin_return_address(0)); }
ALLOTHEQUE_EXPORT void operator delete[](void* p) noexcept {
    delete_impl(p, op::delete_array, __builtin_return_address(0));
}
ALLOTHEQUE_EXPORT void operator delete(void* p, const std::nothrow_t&) noexcept {
    delete_impl(p, op::delete_, __builtin_return_address(0));
}
ALLOTHEQUE_EXPORT void operator delete[](void* p, const std::nothrow_t&) noexcept {
    delete_impl(p, op::delete_array, __builtin_return_address(0));
}
ALLOTHEQUE_EXPORT void operator delete(void* p, std::size_t n) noexcept {
    delete_impl(p, op::delete_, __builtin_return_address(0), n, true);
}
ALLOTHEQUE_EXPORT void operator delete[](void* p, std::size_t n) noexcept {
    delete_impl(p, op::delete_array, __builtin_return_address(0), n, true);
}
ALLOTHEQUE_EXPORT void operator delete(void* p, std::align_val_t a) noexcept {
    delete_impl(p, op::delete_, __builtin_return_address(0), 0, false, size_t(a));
}
ALLOTHEQUE_EXPORT void operator delete[](void* p, std::align_val_t a) noexcept {
    delete_impl(p, op::delete_array, __builtin_return_address(0), 0, false, size_t(a));
}
ALLOTHEQUE_EXPORT void operator delete(void* p, std::size_t n, std::align_val_t a) noexcept {
    delete_impl(p, op::delete_, __builtin_return_address(0), n, true, size_t(a));
}
ALLOTHEQUE_EXPORT void operator delete[](void* p, std::size_t n, std::align_val_t a) noexcept {
    delete_impl(p, op::delete_array, __builtin_return_address(0), n, true, size_t(a));
}
ALLOTHEQUE_EXPORT void operator delete(void* p, std::align_val_t a, const std::nothrow_t&) noexcept {
    delete_impl(p, op::delete_, __builtin_return_address(0), 0, false, size_t(a));
}
ALLOTHEQUE_EXPORT void operator delete[](void* p, std::align_val_t a, const std::nothrow_t&) noexcept {
    delete_impl(p, op::delete_array, __builtin_return_address(0), 0, false, size_t(a));
}
