// allotheque-trace record [-o FILE] [--] PROGRAM [ARGS...]
//
// Runs PROGRAM with liballotheque_trace.so preloaded and ALLOTHEQUE_TRACE=FILE,
// waits for it, then checks every trace it left and prints what was recorded:
// FILE for the program itself (the last one its process exec'd, when it is a
// wrapper), FILE.<pid>.exec<k> for the programs that process ran before, and
// FILE.<pid>[.<k>] for processes it forked (see tracer.cpp). The exit status is the program's
// (128 + signal number if a signal killed it); 127 if PROGRAM cannot be found.
//
// The tracer library is looked for in $ALLOTHEQUE_TRACE_LIB, next to this
// executable (the build tree puts both in build/<preset>/tools), then in the
// install libdir.
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <allotheque/trace/reader.hpp>

#include "commands.hpp"

#ifndef ALLOTHEQUE_TRACE_INSTALLED_LIBDIR
#define ALLOTHEQUE_TRACE_INSTALLED_LIBDIR "/usr/local/lib"
#endif

namespace allotheque::tools {
namespace {

namespace tr = allotheque::trace;

constexpr const char* lib_name = "liballotheque_trace.so";

void usage(std::FILE* out) {
    std::fputs(
        "usage: allotheque-trace record [-o FILE] [--] PROGRAM [ARGS...]\n"
        "Runs PROGRAM under the allocation tracer (LD_PRELOAD=liballotheque_trace.so) and writes\n"
        "its trace to FILE (default: allotheque.trace). A process PROGRAM forks writes FILE.<pid>.\n"
        "A program that execs another (a wrapper script) hands FILE on to it and keeps its own\n"
        "trace as FILE.<pid>.exec<k>, so FILE is the trace of the program that did the work.\n"
        "An existing FILE, and old FILE.<pid> traces, are removed first.\n"
        "  -o, --output FILE   the trace file\n"
        "  -h, --help          this text\n"
        "Exit status: PROGRAM's (128+N if signal N killed it); 127 if PROGRAM is not found;\n"
        "1 if no trace was written. The tracer records glibc's malloc: a malloc replacement\n"
        "preloaded after it is not traced.\n"
        "Environment: ALLOTHEQUE_TRACE_LIB overrides where the tracer library is looked for.\n",
        out);
}

bool is_file(const std::string& p, int mode) {
    struct stat st;
    return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(p.c_str(), mode) == 0;
}

std::string dir_of(const std::string& p) {
    const auto i = p.rfind('/');
    return i == std::string::npos ? std::string(".") : i == 0 ? std::string("/") : p.substr(0, i);
}

std::string self_dir() {
    char buf[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return {};
    return dir_of(std::string(buf, std::size_t(n)));
}

// The tracer library; `looked` lists the places tried.
std::string find_tracer(std::vector<std::string>& looked) {
    if (const char* e = std::getenv("ALLOTHEQUE_TRACE_LIB"); e && *e) {
        looked.emplace_back(e);
        return is_file(e, R_OK) ? std::string(e) : std::string();
    }
    std::vector<std::string> dirs;
    if (auto d = self_dir(); !d.empty()) dirs.push_back(d);
    dirs.emplace_back(ALLOTHEQUE_TRACE_INSTALLED_LIBDIR);
    for (const auto& d : dirs) {
        std::string p = d + "/" + lib_name;
        looked.push_back(p);
        if (is_file(p, R_OK)) {
            if (p[0] != '/') {
                char cwd[PATH_MAX];
                if (getcwd(cwd, sizeof cwd)) p = std::string(cwd) + "/" + p;
            }
            return p;
        }
    }
    return {};
}

// execvp's lookup, done before forking so that "not found" is a clear error.
std::string find_program(const std::string& name) {
    if (name.find('/') != std::string::npos) return is_file(name, X_OK) ? name : std::string();
    const char* path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
    std::size_t i = 0;
    while (i <= dirs.size()) {
        std::size_t j = dirs.find(':', i);
        if (j == std::string::npos) j = dirs.size();
        std::string d = dirs.substr(i, j - i);
        if (d.empty()) d = ".";
        const std::string p = d + "/" + name;
        if (is_file(p, X_OK)) return p;
        i = j + 1;
    }
    return {};
}

std::string absolute(const std::string& p) {
    if (!p.empty() && p[0] == '/') return p;
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) return p;
    return std::string(cwd) + "/" + p;
}

bool has_trace_magic(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    char m[sizeof tr::file_magic];
    return in.read(m, sizeof m) && std::memcmp(m, tr::file_magic, sizeof m) == 0;
}

// FILE.<digits>[.<digits>...][.exec<digits>]: the traces of forked processes
// (FILE.<pid>, FILE.<pid>.<k>) and of programs that exec'd another one
// (FILE.<pid>.exec<k>, see tracer.cpp).
bool is_trace_suffix(const std::string& rest) {
    std::size_t i = 0;
    auto digits = [&] {
        const std::size_t s = i;
        while (i < rest.size() && std::isdigit(static_cast<unsigned char>(rest[i]))) ++i;
        return i > s;
    };
    if (!digits()) return false;
    while (i < rest.size()) {
        if (rest[i] != '.') return false;
        ++i;
        if (rest.compare(i, 4, "exec") == 0) {
            i += 4;
            return digits() && i == rest.size();
        }
        if (!digits()) return false;
    }
    return true;
}

std::vector<std::string> child_traces(const std::string& file) {
    std::vector<std::string> out;
    const std::string dir = dir_of(file), base = file.substr(file.rfind('/') + 1) + ".";
    DIR* d = opendir(dir.c_str());
    if (!d) return out;
    while (dirent* e = readdir(d)) {
        const std::string name = e->d_name;
        if (name.size() <= base.size() || name.compare(0, base.size(), base) != 0) continue;
        if (!is_trace_suffix(name.substr(base.size()))) continue;
        out.push_back(dir + "/" + name);
    }
    closedir(d);
    std::sort(out.begin(), out.end());
    return out;
}

// FILE.<pid>.exec<k> for k = 1, 2, ...: the programs process `pid` ran before
// it exec'd the one whose trace is FILE, oldest first.
std::vector<std::string> exec_traces(const std::string& file, pid_t pid) {
    std::vector<std::string> out;
    for (int k = 1; k < 100; ++k) {
        const std::string p = file + "." + std::to_string(pid) + ".exec" + std::to_string(k);
        struct stat st;
        if (stat(p.c_str(), &st) != 0) break;
        out.push_back(p);
    }
    return out;
}

// What a trace holds, read record by record (a trace can be far bigger than
// memory as decoded events, so this does not use parse_trace): every checksum
// and block sequence number is verified and every event decoded, as the
// reader does, without keeping the events.
struct scan {
    std::uint64_t bytes = 0, events = 0, blocks = 0;
    std::set<std::uint32_t> threads;
    std::uint32_t pid = 0;
    std::string exe;
    bool complete = false;
    tr::end_record end{};
    std::string problem;  // why the trace is incomplete or invalid
};

scan scan_trace(const std::string& path) {
    scan s;
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        s.problem = "cannot open";
        return s;
    }
    in.seekg(0, std::ios::end);
    s.bytes = static_cast<std::uint64_t>(in.tellg());
    in.seekg(0);
    std::uint64_t off = 0;
    try {
        std::byte fh[tr::file_header_bytes];
        if (!in.read(reinterpret_cast<char*>(fh), sizeof fh))
            throw tr::trace_error("not an allotheque trace: file shorter than its 32-byte header", 0);
        if (std::memcmp(fh, tr::file_magic, sizeof tr::file_magic) != 0)
            throw tr::trace_error("not an allotheque trace: bad magic number", 0);
        if (tr::load<std::uint16_t>(fh + 8) != tr::format_major)
            throw tr::trace_error("unsupported trace format version", 8);
        off = tr::load<std::uint32_t>(fh + 12);
        in.seekg(static_cast<std::streamoff>(off));
        std::vector<std::byte> payload;
        while (off < s.bytes) {
            std::byte rh[tr::record_header_bytes];
            if (s.bytes - off < sizeof rh || !in.read(reinterpret_cast<char*>(rh), sizeof rh))
                throw tr::trace_error("trace truncated inside a record header", off);
            const auto type = tr::record_type(tr::load<std::uint32_t>(rh));
            const auto size = tr::load<std::uint32_t>(rh + 4);
            if (size > tr::max_payload_bytes) throw tr::trace_error("implausible record size", off);
            if (s.bytes - off - sizeof rh < size) throw tr::trace_error("trace truncated inside a record", off);
            payload.resize(size);
            if (size && !in.read(reinterpret_cast<char*>(payload.data()), size))
                throw tr::trace_error("read error", off);
            if (tr::checksum(payload.data(), size) != tr::load<std::uint64_t>(rh + 8))
                throw tr::trace_error("corrupt record: checksum mismatch", off);
            if (s.complete) throw tr::trace_error("record after the END record", off);
            const std::uint64_t poff = off + sizeof rh;
            if (type == tr::record_type::process && size >= tr::process_header::bytes) {
                tr::process_header h;
                std::memcpy(&h, payload.data(), sizeof h);
                s.pid = h.pid;
                tr::detail::cursor c(payload.data() + sizeof h, payload.data() + size, poff + sizeof h);
                s.exe = c.text("executable path");
            } else if (type == tr::record_type::block) {
                if (size < tr::block_header::bytes) throw tr::trace_error("block record shorter than its header", off);
                tr::block_header h;
                std::memcpy(&h, payload.data(), sizeof h);
                if (h.sequence != s.blocks) throw tr::trace_error("a block is missing", off);
                tr::detail::cursor c(payload.data() + sizeof h, payload.data() + size, poff + sizeof h);
                for (std::uint32_t i = 0; i < h.events; ++i) {
                    const std::uint8_t code = c.byte();
                    const auto o = tr::op(code & tr::op_mask);
                    if (!tr::is_known(code & tr::op_mask)) c.fail("unknown operation code");
                    if (code & tr::flag_aligned) c.byte();
                    c.varint();
                    c.varint();
                    if (tr::is_allocation(o) || (code & tr::flag_sized)) c.varint();
                    if (o == tr::op::realloc_) c.varint();
                    c.varint();
                }
                if (!c.done()) c.fail("block has bytes after its last event");
                ++s.blocks;
                s.events += h.events;
                s.threads.insert(h.thread);
            } else if (type == tr::record_type::end && size >= tr::end_record::bytes) {
                std::memcpy(&s.end, payload.data(), sizeof s.end);
                if (s.end.blocks != s.blocks || s.end.events != s.events)
                    throw tr::trace_error("END record totals do not match the blocks", off);
                s.complete = true;
            }
            off = poff + size;
        }
        if (!s.complete) s.problem = "no END record: the process was killed, or exec'd another program";
    } catch (const tr::trace_error& e) {
        s.problem = e.what();
    }
    return s;
}

std::string human_bytes(std::uint64_t n) {
    char b[64];
    if (n < 10 * 1024) std::snprintf(b, sizeof b, "%llu B", static_cast<unsigned long long>(n));
    else if (n < 10ull << 20) std::snprintf(b, sizeof b, "%.1f KiB", double(n) / 1024);
    else if (n < 10ull << 30) std::snprintf(b, sizeof b, "%.1f MiB", double(n) / (1 << 20));
    else std::snprintf(b, sizeof b, "%.1f GiB", double(n) / (1 << 30));
    return b;
}

std::string describe(const scan& s) {
    std::string t = std::to_string(s.events) + " events, " + std::to_string(s.threads.size()) +
                    (s.threads.size() == 1 ? " thread, " : " threads, ") + human_bytes(s.bytes);
    if (s.complete && s.end.dropped) t += ", " + std::to_string(s.end.dropped) + " dropped";
    if (!s.problem.empty()) t += " (" + s.problem + ")";
    return t;
}

} // namespace

int cmd_record(int argc, char** argv) {
    std::string out = "allotheque.trace";
    int i = 1;
    for (; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--") {
            ++i;
            break;
        }
        if (a == "-h" || a == "--help") {
            usage(stdout);
            return 0;
        }
        if (a == "-o" || a == "--output") {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "allotheque-trace record: %s needs a file name\n", a.c_str());
                return 2;
            }
            out = argv[++i];
        } else if (a.rfind("--output=", 0) == 0) {
            out = a.substr(9);
        } else if (a.rfind("-o", 0) == 0) {
            out = a.substr(2);
        } else if (a.size() > 1 && a[0] == '-') {
            std::fprintf(stderr, "allotheque-trace record: unknown option '%s'\n", a.c_str());
            usage(stderr);
            return 2;
        } else {
            break;
        }
    }
    if (i >= argc) {
        std::fputs("allotheque-trace record: no program to run\n", stderr);
        usage(stderr);
        return 2;
    }
    if (out.empty()) {
        std::fputs("allotheque-trace record: empty output file name\n", stderr);
        return 2;
    }
    const std::string program = find_program(argv[i]);
    if (program.empty()) {
        std::fprintf(stderr, "allotheque-trace record: %s: program not found%s\n", argv[i],
                     std::strchr(argv[i], '/') ? " (or not executable)" : " in PATH");
        return 127;
    }
    std::vector<std::string> looked;
    const std::string lib = find_tracer(looked);
    if (lib.empty()) {
        std::string where;
        for (const auto& l : looked) where += "\n  " + l;
        std::fprintf(stderr,
                     "allotheque-trace record: the tracer library %s was not found; looked at:%s\n"
                     "(build the allotheque_trace target, or set ALLOTHEQUE_TRACE_LIB)\n",
                     lib_name, where.c_str());
        return 1;
    }
    out = absolute(out);
    if (unlink(out.c_str()) != 0 && errno != ENOENT) {
        std::fprintf(stderr, "allotheque-trace record: cannot remove %s: %s\n", out.c_str(), std::strerror(errno));
        return 1;
    }
    for (const auto& f : child_traces(out))
        if (has_trace_magic(f)) unlink(f.c_str());

    std::fflush(nullptr);
    timespec t0{}, t1{};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const pid_t pid = fork();
    if (pid < 0) {
        std::fprintf(stderr, "allotheque-trace record: fork: %s\n", std::strerror(errno));
        return 1;
    }
    if (pid == 0) {
        const char* old = std::getenv("LD_PRELOAD");
        const std::string preload = old && *old ? lib + ":" + old : lib;
        setenv("LD_PRELOAD", preload.c_str(), 1);
        setenv("ALLOTHEQUE_TRACE", out.c_str(), 1);
        execv(program.c_str(), argv + i);
        std::fprintf(stderr, "allotheque-trace record: cannot run %s: %s\n", program.c_str(), std::strerror(errno));
        _exit(127);
    }
    // The terminal's ^C and ^\ are for the program; we report afterwards.
    struct sigaction ign {}, old_int {}, old_quit {};
    ign.sa_handler = SIG_IGN;
    sigaction(SIGINT, &ign, &old_int);
    sigaction(SIGQUIT, &ign, &old_quit);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            std::fprintf(stderr, "allotheque-trace record: waitpid: %s\n", std::strerror(errno));
            return 1;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGQUIT, &old_quit, nullptr);
    const double ran = double(t1.tv_sec - t0.tv_sec) + double(t1.tv_nsec - t0.tv_nsec) / 1e9;
    int code = 0;
    std::string how;
    if (WIFEXITED(status)) {
        code = WEXITSTATUS(status);
        if (code) how = ", exit status " + std::to_string(code);
    } else if (WIFSIGNALED(status)) {
        code = 128 + WTERMSIG(status);
        how = std::string(", killed by signal ") + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
    }

    auto execs = exec_traces(out, pid);
    struct stat st;
    if (stat(out.c_str(), &st) != 0 && !execs.empty()) {
        // The last program exec'd was not traced (static, set-user-ID, or run
        // without LD_PRELOAD): the last one that was gets the name.
        const std::string last = execs.back();
        execs.pop_back();
        if (rename(last.c_str(), out.c_str()) == 0)
            std::fprintf(stderr,
                         "allotheque-trace: the last program process %d exec'd wrote no trace (a static or "
                         "set-user-ID program ignores LD_PRELOAD); %s is the trace of the one before it\n",
                         int(pid), out.c_str());
    }
    if (stat(out.c_str(), &st) != 0) {
        std::fprintf(stderr,
                     "allotheque-trace record: %s wrote no trace %s (a static or set-user-ID program ignores "
                     "LD_PRELOAD)%s\n",
                     argv[i], out.c_str(), how.c_str());
        return code ? code : 1;
    }
    auto name_of = [](const std::string& p) { return p.substr(p.rfind('/') + 1); };
    auto exe_of = [](const scan& s) { return s.exe.substr(s.exe.rfind('/') + 1); };
    // "t.123 (pid 123 dash: 4 events, ...); ..." for at most 8 traces.
    auto list = [&](const std::vector<std::string>& files, std::uint64_t& events, std::uint64_t& bytes) {
        std::string l;
        for (std::size_t k = 0; k < files.size(); ++k) {
            const scan c = scan_trace(files[k]);
            events += c.events;
            bytes += c.bytes;
            if (k < 8)
                l += (k ? "; " : "") + name_of(files[k]) + " (pid " + std::to_string(c.pid) +
                     (c.exe.empty() ? "" : " " + exe_of(c)) + ": " + describe(c) + ")";
        }
        if (files.size() > 8) l += "; and " + std::to_string(files.size() - 8) + " more";
        return l;
    };
    const scan main = scan_trace(out);
    std::fprintf(stderr, "allotheque-trace: recorded %s in %s; the program ran %.3f s%s\n", describe(main).c_str(),
                 out.c_str(), ran, how.c_str());
    if (!execs.empty()) {
        std::uint64_t events = 0, bytes = 0;
        const std::string l = list(execs, events, bytes);
        std::fprintf(stderr,
                     "allotheque-trace: process %d exec'd: %s is the trace of the last program it ran%s; "
                     "the program%s before: %s\n",
                     int(pid), name_of(out).c_str(), main.exe.empty() ? "" : (", " + exe_of(main)).c_str(),
                     execs.size() == 1 ? "" : "s", l.c_str());
    }
    std::vector<std::string> children;
    for (const auto& c : child_traces(out))
        if (std::find(execs.begin(), execs.end(), c) == execs.end()) children.push_back(c);
    if (!children.empty()) {
        std::uint64_t events = 0, bytes = 0;
        const std::string l = list(children, events, bytes);
        std::fprintf(stderr, "allotheque-trace: %zu child trace%s, %llu events, %s: %s\n", children.size(),
                     children.size() == 1 ? "" : "s", static_cast<unsigned long long>(events),
                     human_bytes(bytes).c_str(), l.c_str());
    }
    return code;
}

} // namespace allotheque::tools
