// What the benchmarks and the replay worker read about their own process: the
// resident set from /proc/self/status, the VmHWM reset, and which malloc is
// mapped in. Plain syscalls into stack buffers: reading them never calls the
// allocator being measured.
#pragma once
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace allotheque::tools {

// Bytes from a "Name:   123 kB" line of /proc/self/status (0 if absent).
inline std::size_t proc_status_bytes(const char* key) {
    const int fd = ::open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char buf[8192];
    std::size_t n = 0;
    for (ssize_t r; n < sizeof buf - 1 && (r = ::read(fd, buf + n, sizeof buf - 1 - n)) > 0;) n += std::size_t(r);
    ::close(fd);
    buf[n] = '\0';
    const std::size_t k = std::strlen(key);
    for (const char* line = buf; line && *line;) {
        if (std::strncmp(line, key, k) == 0 && line[k] == ':') return std::strtoull(line + k + 1, nullptr, 10) * 1024;
        line = std::strchr(line, '\n');
        if (line) ++line;
    }
    return 0;
}

// Calls f(line) on each line of /proc/self/maps (without its newline) until f
// returns false; false when the file cannot be read. Through a stack buffer:
// reading it never calls the allocator being measured.
template <class F>
bool for_each_mapping(F&& f) {
    const int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    char buf[16384];
    std::size_t have = 0;
    bool more = true;
    for (ssize_t r; more && (r = ::read(fd, buf + have, sizeof buf - 1 - have)) > 0;) {
        have += std::size_t(r);
        buf[have] = '\0';
        char* line = buf;
        for (char* nl; more && (nl = std::strchr(line, '\n')) != nullptr; line = nl + 1) {
            *nl = '\0';
            more = f(static_cast<const char*>(line));
        }
        have = static_cast<std::size_t>(buf + have - line);
        std::memmove(buf, line, have);
        if (have == sizeof buf - 1) have = 0;   // a line longer than the buffer: dropped
    }
    ::close(fd);
    return true;
}

// Reads one byte of every page of every readable file-backed mapping (the
// executable's and the libraries' code and constants), so that those pages
// are resident before a measurement starts. Otherwise the library code a
// program first runs during the measurement (libstdc++'s tree and list code,
// libm) is counted as its memory: ~0.35 MB, the same for every allocator,
// which reads as 65 % fragmentation on a program that requests 0.5 MB.
// Only whole pages inside the file are read (a page past its end would raise
// SIGBUS). Returns the bytes read over.
// The reads are not instrumented: a file-backed data segment holds globals
// and their redzones, which AddressSanitizer would report.
__attribute__((no_sanitize("address", "thread"))) inline void touch_page(unsigned long a) {
    (void)*reinterpret_cast<const volatile char*>(a);
}
inline std::size_t prefault_file_mappings() {
    const auto page = static_cast<unsigned long>(::sysconf(_SC_PAGESIZE));
    std::size_t touched = 0;
    for_each_mapping([&](const char* line) {
        // "lo-hi perms offset dev inode   path"
        unsigned long lo = 0, hi = 0, off = 0;
        char perms[8] = {};
        int path_at = 0;
        if (std::sscanf(line, "%lx-%lx %7s %lx %*s %*s %n", &lo, &hi, perms, &off, &path_at) < 4) return true;
        const char* path = line + path_at;
        if (perms[0] != 'r' || path[0] != '/') return true;
        struct stat st {};
        if (::stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return true;
        const auto file_end = static_cast<unsigned long>(st.st_size);
        for (unsigned long a = lo; a < hi && off + (a - lo) + page <= file_end; a += page) {
            touch_page(a);
            touched += page;
        }
        return true;
    });
    return touched;
}

// Resets VmHWM to the current RSS (Linux >= 4.0), so a peak read afterwards
// belongs to what ran since, not to the set-up before it.
inline bool reset_peak_rss() {
    const int fd = ::open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const bool ok = ::write(fd, "5", 1) == 1;
    return ::close(fd) == 0 && ok;
}

// The memory measure of the benchmark drivers and the replay worker, in one
// order everywhere: file-backed pages made resident, the peak reset, the
// resident set read; afterwards, the peak's growth over it.
struct memory_probe {
    bool hwm_reset = false;
    std::size_t rss_before = 0;
    void start() {
        prefault_file_mappings();
        hwm_reset = reset_peak_rss();
        rss_before = proc_status_bytes("VmRSS");
    }
    std::size_t peak_delta() const {
        const std::size_t hwm = proc_status_bytes("VmHWM");
        return hwm > rss_before ? hwm - rss_before : 0;
    }
};

// The machine's physical memory in bytes (0 if unknown).
inline std::size_t physical_memory_bytes() {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? std::size_t(pages) * std::size_t(page) : 0;
}

// "jemalloc", "mimalloc", "tcmalloc" or "allotheque" (liballotheque_malloc*.so)
// when that library is mapped into this process (LD_PRELOAD), otherwise
// "glibc", from /proc/self/maps.
inline const char* malloc_library() {
    // The file name each library's path contains, and the name reported.
    static constexpr const char* libraries[][2] = {{"libjemalloc", "jemalloc"},
                                                   {"libmimalloc", "mimalloc"},
                                                   {"libtcmalloc", "tcmalloc"},
                                                   {"liballotheque_malloc", "allotheque"}};
    const char* found = "glibc";
    const bool read = for_each_mapping([&](const char* line) {
        for (const auto& lib : libraries)
            if (std::strstr(line, lib[0])) {
                found = lib[1];
                return false;
            }
        return true;
    });
    return read ? found : "unknown";
}

} // namespace allotheque::tools
