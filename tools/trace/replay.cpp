// allotheque-trace replay [--allocators A,B,...] [--repeat N] [--json FILE] [--allow-truncated]
//                         [--keep-plan FILE] [--touch-limit BYTES|all] TRACE
//
// Replays a trace against every allocator and recommends one (docs/trace.md,
// "Replay"). The trace is parsed and planned once (replay_plan.hpp: sequence,
// sizes, alignments, neighbour hints); the plan goes to a temporary file;
// allotheque-replay-worker replays it once per (allocator, repetition), each in
// a fresh process (LD_PRELOAD for jemalloc/mimalloc/tcmalloc and for the
// shipped allotheque mallocs, rows malloc-<heap>: replay_rows.hpp), the
// allocators interleaved within each repetition. Medians over the repetitions.
//
// Ranking (replay_rank.hpp): score = time_ratio × memory_ratio, both relative
// to glibc (lower is better): an allocator 10 % faster at 10 % more memory
// scores like glibc. Named: the fastest, the leanest, and the best balanced
// (lowest score) — or "no clear winner" where the runs' spread says the
// leaders are within the noise — and how to use the pick (the LD_PRELOAD
// line, or the C++ that declares it).
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <allotheque/trace/objects.hpp>
#include <allotheque/trace/reader.hpp>

#include "commands.hpp"
#include "process_memory.hpp"
#include "replay_plan.hpp"
#include "replay_rank.hpp"
#include "replay_rows.hpp"
#include "spawn.hpp"

extern char** environ;

namespace allotheque::tools {
namespace {

namespace rp = allotheque::tools::replay;
const char* const me = "allotheque-trace replay";

using rp::row_info;
using rp::row_kind;

bool executable(const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

bool readable_file(const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), R_OK) == 0;
}

// The directory of this executable ("" if unknown).
std::string self_dir() {
    char buf[4096];
    const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return {};
    std::string dir(buf, std::size_t(n));
    const auto slash = dir.find_last_of('/');
    return slash == std::string::npos ? std::string() : dir.substr(0, slash);
}

// LD_PRELOAD wants a path that does not depend on the directory the program
// runs in, and the recommendation prints it: absolute, without "..".
std::string canonical(const std::string& p) {
    char buf[PATH_MAX];
    return ::realpath(p.c_str(), buf) ? std::string(buf) : p;
}

// Where the shipped malloc libraries are looked for, in order:
// $ALLOTHEQUE_MALLOC_LIB_DIR alone when set; else the build tree this program
// belongs to (<build>/tools/allotheque-trace, libraries in <build>/src/malloc);
// else the install it belongs to (<prefix>/bin/allotheque-trace, libraries in
// <prefix>/<libdir>), then the configured install directory.
std::vector<std::string> malloc_library_dirs(bool& overridden) {
    std::vector<std::string> dirs;
    overridden = false;
    if (const char* e = std::getenv("ALLOTHEQUE_MALLOC_LIB_DIR"); e && *e) {
        overridden = true;
        dirs.emplace_back(e);
        return dirs;
    }
    if (const std::string self = self_dir(); !self.empty()) {
        dirs.push_back(self + "/../src/malloc");
#ifdef ALLOTHEQUE_TRACE_INSTALL_LIBDIR
        if (ALLOTHEQUE_TRACE_INSTALL_LIBDIR[0] != '/') dirs.push_back(self + "/../" ALLOTHEQUE_TRACE_INSTALL_LIBDIR);
#endif
    }
#ifdef ALLOTHEQUE_TRACE_INSTALLED_LIBDIR
    dirs.emplace_back(ALLOTHEQUE_TRACE_INSTALLED_LIBDIR);
#endif
    return dirs;
}

// Whether `dir` is this program's build tree's src/malloc: its libraries
// were built with this tree's configuration.
bool in_own_build_tree(const std::string& dir) {
    const std::string self = self_dir();
    return !self.empty() && canonical(dir) == canonical(self + "/../src/malloc");
}

// The configuration this tree built (a Debug tree builds the malloc
// libraries unoptimised: their times say nothing of a release build's).
bool unoptimised_build() {
#ifdef ALLOTHEQUE_TRACE_BUILD_CONFIG
    const std::string_view c = ALLOTHEQUE_TRACE_BUILD_CONFIG;
    return c.empty() || c == "Debug";
#else
    return false;
#endif
}

// The shared library a row preloads: "" for rows that need none, nullopt
// (with the reason in `why`) when it cannot be found.
std::optional<std::string> preload_for(const row_info& r, std::string& why) {
    if (r.kind == row_kind::peer_malloc) {
        static const char* const dirs[] = {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64",
                                           "/usr/lib", "/usr/local/lib", "/usr/local/lib64"};
        for (const char* d : dirs) {
            const std::string p = std::string(d) + "/" + r.library;
            if (::access(p.c_str(), R_OK) == 0) return p;
        }
        why = std::string("lib") + r.name + " is not installed";
        return std::nullopt;
    }
    if (r.kind != row_kind::allotheque_malloc) return std::string();
    bool overridden = false;
    const auto dirs = malloc_library_dirs(overridden);
    const std::string file = rp::allotheque_malloc_file(r);
    for (const auto& d : dirs)
        if (readable_file(d + "/" + file)) return canonical(d + "/" + file);
    if (overridden) {
        why = file + " is not in $ALLOTHEQUE_MALLOC_LIB_DIR (" + dirs.front() + ")";
    } else {
        why = file + " not found (looked in";
        for (std::size_t i = 0; i < dirs.size(); ++i) {
            why += i ? ", " : " ";
            why += canonical(dirs[i]);
        }
        why += std::string("): build the target allotheque_malloc_") + r.library +
               ", or set ALLOTHEQUE_MALLOC_LIB_DIR";
    }
    return std::nullopt;
}

// Next to this executable (the build tree and the install both put it there),
// else the install directory; $ALLOTHEQUE_REPLAY_WORKER overrides both.
std::string find_worker() {
    if (const char* e = std::getenv("ALLOTHEQUE_REPLAY_WORKER"); e && *e) return e;
    if (const std::string dir = self_dir(); !dir.empty()) {
        const std::string p = dir + "/allotheque-replay-worker";
        if (executable(p)) return p;
    }
#ifdef ALLOTHEQUE_TRACE_INSTALLED_BINDIR
    const std::string p = std::string(ALLOTHEQUE_TRACE_INSTALLED_BINDIR) + "/allotheque-replay-worker";
    if (executable(p)) return p;
#endif
    return {};
}

// --- running one worker -----------------------------------------------------

struct run_output {
    int status = -1;      // exit status, or 128 + signal
    std::string out;      // stdout and stderr, interleaved
};

run_output spawn(const std::string& exe, const std::vector<std::string>& args, const std::string& preload) {
    run_output r;
    std::vector<std::string> env_store;
    for (char** e = environ; *e; ++e)
        if (std::strncmp(*e, "LD_PRELOAD=", 11) != 0) env_store.emplace_back(*e);
    if (!preload.empty()) env_store.push_back("LD_PRELOAD=" + preload);
    std::vector<char*> envp;
    for (auto& s : env_store) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> argv{exe};
    argv.insert(argv.end(), args.begin(), args.end());
    auto sr = spawn_capture(argv, envp.data());
    r.status = sr.started ? sr.status : -1;
    r.out = std::move(sr.out);
    return r;
}

// The worker prints one flat JSON object; read a field from it.
std::optional<double> json_number(const std::string& line, const char* key) {
    const std::string k = std::string("\"") + key + "\": ";
    const auto at = line.find(k);
    if (at == std::string::npos) return std::nullopt;
    const char* s = line.c_str() + at + k.size();
    char* end = nullptr;
    const double v = std::strtod(s, &end);
    if (end == s) return std::nullopt;
    return v;
}

// Calls f(line) for each line of `out`.
template <class F>
void for_each_line(const std::string& out, F f) {
    for (std::size_t i = 0; i < out.size();) {
        std::size_t j = out.find('\n', i);
        if (j == std::string::npos) j = out.size();
        f(std::string_view(out).substr(i, j - i));
        i = j + 1;
    }
}

std::string json_line(const std::string& out) {
    std::string last;
    for_each_line(out, [&](std::string_view l) {
        if (!l.empty() && l[0] == '{') last = l;
    });
    return last;
}

// The last line that is not the JSON result: the worker's message.
std::string error_text(const std::string& out) {
    std::string msg;
    for_each_line(out, [&](std::string_view l) {
        if (!l.empty() && l[0] != '{') msg = l;
    });
    return msg;
}

// --- results ------------------------------------------------------------------

using rp::row;

std::string json_escape(const std::string& s) {
    std::string o;
    for (const char c : s) {
        if (c == '"' || c == '\\') o += '\\', o += c;
        else if (static_cast<unsigned char>(c) < 0x20) {
            char b[8];
            std::snprintf(b, sizeof b, "\\u%04x", c);
            o += b;
        } else o += c;
    }
    return o;
}

std::string fmt(const char* f, double v) { return rp::format_number(f, v); }

// The recommendation's "use" object: how to adopt the pick, as printed, and
// split into what a script would take (docs/trace.md, "JSON").
std::string use_json(const std::string& name, const row_info& info, const rp::usage& u) {
    auto str_or_null = [](const std::string& v) { return v.empty() ? std::string("null") : "\"" + json_escape(v) + "\""; };
    auto array = [](const std::vector<std::string>& v) {
        std::string a = "[";
        for (std::size_t i = 0; i < v.size(); ++i) {
            a += i ? ", \"" : "\"";
            a += json_escape(v[i]);
            a += '"';
        }
        return a + "]";
    };
    return "{\"allocator\": \"" + name + "\", \"kind\": \"" + rp::kind_id(info.kind) +
           "\", \"preload\": " + str_or_null(u.preload) + ", \"cxx\": " + str_or_null(u.cxx) +
           ", \"malloc_cxx\": " + str_or_null(u.malloc_cxx) + ", \"cmake\": " + str_or_null(u.cmake) +
           ", \"text\": " + array(u.text) + "}";
}

// Removes the plan file however the command ends.
struct temp_file {
    std::string path;
    ~temp_file() {
        if (!path.empty()) ::unlink(path.c_str());
    }
};

int usage(std::FILE* out) {
    std::fputs(
        "usage: allotheque-trace replay [--allocators A,B,...] [--repeat N] [--json FILE] [--allow-truncated]\n"
        "                               [--keep-plan FILE] [--touch-limit BYTES|all] TRACE\n"
        "  Replays TRACE (same sequence, sizes, alignments; hints = the replay address of the object the\n"
        "  traced program had next to each new one) on every allocator, each run in its own process,\n"
        "  and prints time, peak OS memory and fragmentation per allocator with a recommendation.\n"
        "  --allocators   subset of (default: all)\n"
        "                 malloc libraries, preloaded: glibc jemalloc mimalloc tcmalloc, and allotheque's\n"
        "                   malloc-segregated malloc-quickfit malloc-kingsley malloc-velox malloc-medius malloc-lea\n"
        "                 header-only heaps, called directly: segregated kingsley quickfit velox medius defero\n"
        "                   lea lea_deferred kingsley_coalescing; and pmr\n"
        "  --repeat N     runs per allocator, interleaved; the median is reported (default 3)\n"
        "  --json FILE    also write the results as JSON\n"
        "  --allow-truncated  replay what a trace without an END record holds\n"
        "  --keep-plan FILE   keep the replay plan in FILE (to run allotheque-replay-worker by hand)\n"
        "  --touch-limit BYTES|all  pages written per object: one byte per page of its first BYTES\n"
        "                 (K, M, G suffixes; default 1M), besides its first and last 64 bytes\n"
        "  Score = (time / glibc's time) x (peak memory / glibc's peak); lower is better. A title goes to\n"
        "  an allocator only when its runs all beat the others' (else: no clear winner). The recommendation\n"
        "  says how to use the pick: the LD_PRELOAD line, or the C++ lines that declare it.\n"
        "Environment: ALLOTHEQUE_MALLOC_LIB_DIR: where the liballotheque_malloc_<heap>.so libraries are\n"
        "  (default: the build tree or install of this program); ALLOTHEQUE_REPLAY_WORKER: the worker.\n",
        out);
    return out == stdout ? 0 : 2;
}

} // namespace

int cmd_replay(int argc, char** argv) {
    std::vector<std::string> allocators;
    for (const row_info& r : rp::rows) allocators.emplace_back(r.name);
    int repeat = 3;
    std::string json_path, trace_path, keep_plan, touch_arg = "1M";
    std::uint64_t touch_limit = rp::default_touch_limit;
    bool allow_truncated = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> std::optional<std::string> {
            if (const auto eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) return a.substr(eq + 1);
            if (i + 1 >= argc) return std::nullopt;
            return std::string(argv[++i]);
        };
        const std::string key = a.substr(0, a.find('='));
        if (a == "--help" || a == "-h") return usage(stdout);
        if (key == "--allocators") {
            const auto v = value();
            if (!v) return usage(stderr);
            allocators.clear();
            std::size_t s = 0;
            while (s <= v->size()) {
                const std::size_t e = std::min(v->find(',', s), v->size());
                const std::string n = v->substr(s, e - s);
                if (!n.empty()) {
                    if (!rp::find_row(n)) {
                        std::fprintf(stderr, "%s: unknown allocator '%s'\n", me, n.c_str());
                        return usage(stderr);
                    }
                    if (std::find(allocators.begin(), allocators.end(), n) == allocators.end()) allocators.push_back(n);
                }
                s = e + 1;
            }
            if (allocators.empty()) return usage(stderr);
        } else if (key == "--repeat") {
            const auto v = value();
            char* end = nullptr;
            const long n = v ? std::strtol(v->c_str(), &end, 10) : 0;
            if (!v || *end || n < 1 || n > 1000) {
                std::fprintf(stderr, "%s: --repeat needs a count from 1 to 1000\n", me);
                return 2;
            }
            repeat = int(n);
        } else if (key == "--json") {
            const auto v = value();
            if (!v || v->empty()) return usage(stderr);
            json_path = *v;
        } else if (key == "--keep-plan") {
            const auto v = value();
            if (!v || v->empty()) return usage(stderr);
            keep_plan = *v;
        } else if (key == "--touch-limit") {
            const auto v = value();
            if (!v || !rp::parse_touch_limit(*v, touch_limit)) {
                std::fprintf(stderr, "%s: --touch-limit takes a byte count (K, M, G suffixes) or 'all'\n", me);
                return 2;
            }
            touch_arg = *v;
        } else if (a == "--allow-truncated") {
            allow_truncated = true;
        } else if (a.size() > 1 && a[0] == '-') {
            std::fprintf(stderr, "%s: unknown option '%s'\n", me, a.c_str());
            return usage(stderr);
        } else if (trace_path.empty()) {
            trace_path = a;
        } else {
            return usage(stderr);
        }
    }
    if (trace_path.empty()) return usage(stderr);

    // --- plan (off the clock) --------------------------------------------------
    rp::plan plan;
    std::string truncation;
    std::vector<std::string> command;  // the traced program's, for the recommendation
    try {
        allotheque::trace::read_options ro;
        ro.allow_truncated = allow_truncated;
        const auto t = allotheque::trace::read_trace(trace_path, ro);
        truncation = t.truncation;
        command = t.process.args;
        plan = rp::make_plan(t, touch_limit);
    } catch (const allotheque::trace::trace_error& e) {
        // "at byte 0" says nothing for a file that cannot be opened or is not a trace.
        std::fprintf(stderr, "%s: %s\n", me, e.offset() ? e.what() : e.message().c_str());
        if (!allow_truncated && std::string(e.what()).find("truncated") != std::string::npos)
            std::fprintf(stderr, "%s: (--allow-truncated replays what was recorded)\n", me);
        return 1;
    } catch (const rp::plan_error& e) {
        std::fprintf(stderr, "%s: %s: %s\n", me, trace_path.c_str(), e.what());
        return 1;
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "%s: %s: out of memory while reading the trace\n", me, trace_path.c_str());
        return 1;
    }
    if (const std::size_t phys = allotheque::tools::physical_memory_bytes();
        phys && plan.peak_requested_bytes > phys) {
        std::fprintf(stderr, "%s: %s: the trace's peak of %.2f MB live exceeds this machine's memory (%.2f MB): not replayed\n",
                     me, trace_path.c_str(), double(plan.peak_requested_bytes) / 1e6, double(phys) / 1e6);
        return 1;
    }
    const auto& st = plan.stats;
    std::printf("trace %s: %llu events, %llu objects (%llu allocations, %llu reallocs, %llu frees), peak live %.2f MB"
                " (%.2f MB written by the replay)\n",
                trace_path.c_str(), (unsigned long long)st.events, (unsigned long long)plan.objects,
                (unsigned long long)st.allocs, (unsigned long long)st.reallocs, (unsigned long long)st.frees,
                double(plan.peak_requested_bytes) / 1e6, double(plan.peak_touched_bytes) / 1e6);
    if (touch_limit == rp::touch_all)
        std::printf("  touched: every page of every object\n");
    else
        std::printf("  touched: the first and last 64 B of every object and one byte per page of its first %s"
                    " (--touch-limit)\n",
                    touch_arg.c_str());
    std::printf("  hints: %llu of %llu allocations have a live neighbour in the traced address space\n",
                (unsigned long long)st.hinted, (unsigned long long)st.allocs);
    if (st.unknown_frees || st.null_frees || st.failed || st.lost_frees || st.never_freed)
        std::printf("  ignored: %llu frees of unknown addresses, %llu free(NULL), %llu failed allocations;"
                    " %llu lost frees replayed; %llu objects never freed\n",
                    (unsigned long long)st.unknown_frees, (unsigned long long)st.null_frees,
                    (unsigned long long)st.failed, (unsigned long long)st.lost_frees,
                    (unsigned long long)st.never_freed);
    if (st.threads > 1)
        std::printf("  note: %llu threads traced; replayed on one thread in global time order\n",
                    (unsigned long long)st.threads);
    if (!truncation.empty()) std::printf("  note: trace truncated: %s\n", truncation.c_str());
    if (plan.ops.empty()) {
        std::fprintf(stderr, "%s: %s has no allocations to replay\n", me, trace_path.c_str());
        return 1;
    }

    const std::string worker = find_worker();
    if (worker.empty()) {
        std::fprintf(stderr, "%s: cannot find allotheque-replay-worker next to this program or in %s\n", me,
#ifdef ALLOTHEQUE_TRACE_INSTALLED_BINDIR
                     ALLOTHEQUE_TRACE_INSTALLED_BINDIR
#else
                     "the install directory"
#endif
        );
        return 1;
    }

    temp_file plan_file;
    std::string plan_path = keep_plan;  // kept: the user asked for it
    if (plan_path.empty()) {
        const char* tmp = std::getenv("TMPDIR");
        std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/allotheque-replay-XXXXXX";
        const int fd = ::mkstemp(templ.data());
        if (fd < 0) {
            std::fprintf(stderr, "%s: cannot create a temporary file in %s: %s\n", me, tmp && *tmp ? tmp : "/tmp",
                         std::strerror(errno));
            return 1;
        }
        ::close(fd);
        plan_file.path = plan_path = templ;
    }
    try {
        rp::write_plan(plan, plan_path);
    } catch (const rp::plan_error& e) {
        std::fprintf(stderr, "%s: %s\n", me, e.what());
        return 1;
    }
    // The workers read the file; the CLI's own copy is no longer needed.
    plan.ops = {};
    plan.aux = {};

    // --- run ---------------------------------------------------------------------
    std::vector<row> rows;
    std::vector<std::string> preloads;
    for (const auto& n : allocators) {
        row r;
        r.name = n;
        std::string why;
        const auto lib = preload_for(*rp::find_row(n), why);
        if (!lib) {
            r.status = "skipped";
            r.note = why;
        }
        rows.push_back(r);
        preloads.push_back(lib.value_or(""));
    }
    auto preload_of = [&](const std::string& name) -> std::string {
        for (std::size_t k = 0; k < rows.size(); ++k)
            if (rows[k].name == name) return preloads[k];
        std::string why;
        if (const row_info* info = rp::find_row(name)) return preload_for(*info, why).value_or("");
        return {};
    };
    const bool tty = ::isatty(2);
    const int runs = repeat * int(rows.size());
    int done = 0;
    for (int rep = 0; rep < repeat; ++rep) {
        for (std::size_t k = 0; k < rows.size(); ++k) {
            row& r = rows[k];
            ++done;
            if (r.status != "ok") continue;
            if (tty) std::fprintf(stderr, "\r  [%d/%d] %-20s", done, runs, r.name.c_str());
            const run_output o = spawn(worker, {"--allocator", r.name, plan_path}, preloads[k]);
            const std::string line = json_line(o.out);
            const auto secs = json_number(line, "seconds");
            const auto peak = json_number(line, "peak_rss_delta_bytes");
            if (o.status != 0 || !secs || !peak) {
                r.status = "failed";
                std::string why = error_text(o.out);
                if (why.empty())
                    why = o.status > 128 ? "worker killed by signal " + std::to_string(o.status - 128)
                                         : "worker exited with status " + std::to_string(o.status);
                r.note = why;
                continue;
            }
            r.seconds.push_back(*secs);
            r.peak.push_back(*peak);
            r.peak_touched = json_number(line, "peak_touched_bytes").value_or(0);
            if (const auto c = json_number(line, "alignment_capped"); c && *c > 0 && r.note.empty())
                r.note = fmt("%.0f alignments above 4096 replayed as 4096", *c);
        }
    }
    if (tty) std::fprintf(stderr, "\r%40s\r", "");

    // --- rank ----------------------------------------------------------------------
    const rp::ranking ranked = rp::rank(rows);
    if (!ranked.base) {
        std::fprintf(stderr, "%s: no allocator could replay the trace\n", me);
        for (const auto& r : rows) std::fprintf(stderr, "  %s: %s\n", r.name.c_str(), r.note.c_str());
        return 1;
    }
    const row* base = ranked.base;

    // --- table -----------------------------------------------------------------------
    std::printf("\nreplay on %zu allocators, %d run%s each (median), relative to %s; score = time x memory ratio\n",
                rows.size(), repeat, repeat == 1 ? "" : "s", base->name.c_str());
    // The header-only heaps share names with the malloc libraries built on
    // them, and not their figures (other options, no request rounding, no
    // malloc entry points): the kind column and this legend keep them apart.
    std::printf("kind: preloaded malloc = a malloc library under LD_PRELOAD, replayed through malloc, free, realloc\n"
                "        and posix_memalign as the program calls them (malloc-<heap>: liballotheque_malloc_<heap>.so)\n"
                "      header-only heap = allotheque::<name>_heap<> with its default options, called directly\n"
                "        (sized frees, hints): not a malloc, whose figures are its malloc-<heap> row's\n\n");
    // The ratio columns are 9 wide: a longer baseline's name is in the line above.
    const std::string vs = base->name.size() <= 6 ? "vs " + base->name : std::string("ratio");
    std::printf("| %-4s | %-19s | %-16s | %10s | %9s | %9s | %9s | %13s | %6s | %-13s |\n", "rank", "allocator",
                "kind", "time ms", vs.c_str(), "peak MB", vs.c_str(), "fragmentation", "score", "score of runs");
    std::printf("|------|---------------------|------------------|------------|-----------|-----------|-----------|"
                "---------------|--------|---------------|\n");
    int rank = 0;
    std::vector<int> rank_of(ranked.order.size(), 0);
    for (std::size_t i = 0; i < ranked.order.size(); ++i) {
        const row* r = ranked.order[i];
        const char* kind = rp::kind_label(rp::find_row(r->name)->kind);
        if (r->status != "ok") {
            std::printf("| %-4s | %-19s | %-16s | %10s | %9s | %9s | %9s | %13s | %6s | %-13s |  %s: %s\n", "-",
                        r->name.c_str(), kind, "-", "-", "-", "-", "-", "-", "-", r->status.c_str(), r->note.c_str());
            continue;
        }
        rank_of[i] = ++rank;
        std::printf("| %-4d | %-19s | %-16s | %10.3f | %9.2f | %9.2f | %9.2f | %13s | %6.2f | %-13s |%s%s\n", rank,
                    r->name.c_str(), kind, r->time_s * 1e3, r->time_ratio, r->peak_os / 1e6, r->memory_ratio,
                    r->has_frag ? fmt("%.1f %%", r->frag * 100).c_str() : "-", r->score,
                    (fmt("%.2f", r->score_lo) + "-" + fmt("%.2f", r->score_hi)).c_str(), r->note.empty() ? "" : "  ",
                    r->note.c_str());
    }
    std::printf("\n%s", rp::format_verdicts(ranked).c_str());
    if (unoptimised_build()) {
        bool debug_libs = false;
        for (std::size_t k = 0; k < rows.size(); ++k)
            if (rows[k].status == "ok" && rp::find_row(rows[k].name)->kind == row_kind::allotheque_malloc)
                debug_libs = debug_libs || in_own_build_tree(preloads[k].substr(0, preloads[k].find_last_of('/')));
        if (debug_libs)
            std::printf("note: the malloc-* rows ran this Debug build tree's libraries, built without optimisation:"
                        " their times are not a release build's (their memory is)\n");
    }
    const rp::verdict& pick = ranked.recommended;
    const std::string reason = rp::recommendation(ranked);

    // --- how to use the pick ------------------------------------------------------------
    // The recommended allocator, or the lowest median where there is no clear
    // winner (the line above says the others do as well).
    const row_info& pick_info = *rp::find_row(pick.best->name);
    rp::usage_context ctx;
    ctx.library = preload_of(pick.best->name);
    ctx.command = command;
    if (pick_info.malloc_row) {
        ctx.malloc_row_library = preload_of(pick_info.malloc_row);
        for (std::size_t i = 0; i < ranked.order.size(); ++i) {
            const row& r = *ranked.order[i];
            if (r.name != pick_info.malloc_row) continue;
            if (r.status == "ok")
                ctx.malloc_row_result = fmt("%.2f", r.time_ratio) + "x " + base->name + "'s time and " +
                                        fmt("%.2f", r.memory_ratio) + "x its peak memory, score " +
                                        fmt("%.2f", r.score) + ", rank " + std::to_string(rank_of[i]) + " of " +
                                        std::to_string(rank);
            else
                ctx.malloc_row_missing = r.status + ": " + r.note;
        }
    }
    const rp::usage use = rp::how_to_use(pick_info, ctx);
    std::printf("\nto use %s%s:\n", pick.best->name.c_str(), pick.clear() ? "" : " (the lowest median)");
    for (const auto& l : use.text) std::printf("  %s\n", l.c_str());

    // --- JSON --------------------------------------------------------------------------
    if (!json_path.empty()) {
        std::string j = "{\n  \"trace\": \"" + json_escape(trace_path) + "\",\n";
        char b[1024];
        std::snprintf(b, sizeof b,
                      "  \"events\": %llu, \"objects\": %llu, \"allocs\": %llu, \"reallocs\": %llu, \"frees\": %llu,"
                      " \"hinted\": %llu, \"unknown_frees\": %llu, \"failed\": %llu, \"lost_frees\": %llu,"
                      " \"never_freed\": %llu, \"threads\": %llu,\n"
                      "  \"peak_requested_bytes\": %llu, \"peak_touched_bytes\": %llu, \"repeat\": %d,"
                      " \"baseline\": \"%s\",\n"
                      "  \"score\": \"time_ratio * memory_ratio\", \"touch_limit\": %s,\n",
                      (unsigned long long)st.events, (unsigned long long)plan.objects, (unsigned long long)st.allocs,
                      (unsigned long long)st.reallocs, (unsigned long long)st.frees, (unsigned long long)st.hinted,
                      (unsigned long long)st.unknown_frees, (unsigned long long)st.failed,
                      (unsigned long long)st.lost_frees, (unsigned long long)st.never_freed,
                      (unsigned long long)st.threads, (unsigned long long)plan.peak_requested_bytes,
                      (unsigned long long)plan.peak_touched_bytes, repeat,
                      base->name.c_str(),
                      touch_limit == rp::touch_all ? "\"all\"" : std::to_string(touch_limit).c_str());
        j += b;
        j += "  \"results\": [\n";
        for (std::size_t i = 0; i < ranked.order.size(); ++i) {
            const row& r = *ranked.order[i];
            const row_info& info = *rp::find_row(r.name);
            j += "    {\"allocator\": \"" + r.name + "\", \"kind\": \"" + rp::kind_id(info.kind) + "\", \"status\": \"" +
                 r.status + "\"";
            if (const std::string lib = preload_of(r.name); !lib.empty())
                j += ", \"library\": \"" + json_escape(lib) + "\"";
            if (info.type) j += ", \"heap_type\": \"" + json_escape(info.type) + "\"";
            if (!r.note.empty()) j += ", \"note\": \"" + json_escape(r.note) + "\"";
            if (r.status == "ok") {
                std::string secs = "[", peaks = "[";
                for (std::size_t k = 0; k < r.seconds.size(); ++k) {
                    secs += (k ? ", " : "") + fmt("%.6f", r.seconds[k]);
                    peaks += (k ? ", " : "") + fmt("%.0f", r.peak[k]);
                }
                std::snprintf(b, sizeof b,
                              ", \"seconds\": %.6f, \"seconds_all\": %s], \"peak_os_bytes\": %.0f,"
                              " \"peak_rss_delta_bytes_all\": %s], \"peak_touched_bytes\": %.0f,"
                              " \"fragmentation\": %s, \"time_ratio\": %.4f, \"memory_ratio\": %.4f, \"score\": %.4f,"
                              " \"score_runs\": [%.4f, %.4f]",
                              r.time_s, secs.c_str(), r.peak_os, peaks.c_str(), r.peak_touched,
                              r.has_frag ? fmt("%.4f", r.frag).c_str() : "null", r.time_ratio, r.memory_ratio, r.score,
                              r.score_lo, r.score_hi);
                j += b;
            }
            j += i + 1 < ranked.order.size() ? "},\n" : "}\n";
        }
        auto names = [](const rp::verdict& v) {
            std::string a = "[\"" + v.best->name + "\"";
            for (const row* r : v.tied) a += ", \"" + r->name + "\"";
            return a + "]";
        };
        j += "  ],\n  \"recommendation\": {\"fastest\": \"" + ranked.fastest.best->name + "\", \"leanest\": \"" +
             ranked.leanest.best->name + "\", \"balanced\": \"" + pick.best->name + "\", \"clear\": {\"fastest\": " +
             (ranked.fastest.clear() ? "true" : "false") + ", \"leanest\": " + (ranked.leanest.clear() ? "true" : "false") +
             ", \"balanced\": " + (pick.clear() ? "true" : "false") + "}, \"within_noise\": {\"fastest\": " +
             names(ranked.fastest) + ", \"leanest\": " + names(ranked.leanest) + ", \"balanced\": " + names(pick) +
             "}, \"reason\": \"" + json_escape(reason) + "\",\n    \"use\": " + use_json(pick.best->name, pick_info, use) +
             "}\n}\n";
        std::FILE* f = std::fopen(json_path.c_str(), "w");
        const bool ok = f && std::fputs(j.c_str(), f) >= 0;
        if (!f || std::fclose(f) != 0 || !ok) {
            std::fprintf(stderr, "%s: cannot write %s\n", me, json_path.c_str());
            return 1;
        }
    }
    return 0;
}

} // namespace allotheque::tools
