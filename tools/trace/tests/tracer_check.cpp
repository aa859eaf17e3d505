// Checks the traces written by liballotheque_trace.so (see run_tracer_test.sh).
//
//   tracer_check expected TRACE LOGDIR   the traces of `tracer_workload sequence|many`:
//       every LOGDIR/expected.<tag> list is found, event by event and with
//       nothing in between (except at "*"), in one thread of the trace: op,
//       size, address, realloc's old address, alignment, sized and failed
//       flags; distinct tags in distinct threads; call sites inside the
//       workload's own text (by the trace's MAPS); times non-decreasing; END
//       totals equal to what was read; nothing dropped; no allocation twice
//       at a live address, no unknown free; the fork child's trace
//       (TRACE.<childpid>) exists, is complete and holds only the child's events.
//   tracer_check truncated TRACE         rejected as truncated; readable with
//                                        allow_truncated
//   tracer_check complete TRACE [--strict]   complete and self-consistent
//                                        (--strict: no unknown free either)
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <allotheque/trace/objects.hpp>
#include <allotheque/trace/reader.hpp>

namespace tr = allotheque::trace;

namespace {

int failures = 0;

void fail(const std::string& what) {
    if (++failures <= 30) std::fprintf(stderr, "FAIL: %s\n", what.c_str());
}

std::string hex(std::uint64_t v) {
    char b[32];
    std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
    return b;
}

struct expected {
    bool gap = false;
    tr::op kind = tr::op::malloc_;
    std::uint64_t size = 0, address = 0, old_address = 0;
    std::uint32_t align_log2 = 0;
    bool sized = false, failed = false;
    std::string text;
};

bool op_from_name(const std::string& s, tr::op& out) {
    for (std::uint8_t o = 0; o < 32; ++o) {
        if (!tr::is_known(o)) continue;
        if (s == tr::op_name(tr::op(o))) {
            out = tr::op(o);
            return true;
        }
    }
    return false;
}

std::vector<expected> read_expected(const std::string& path) {
    std::ifstream in(path);
    if (!in) {
        fail("cannot read " + path);
        return {};
    }
    std::vector<expected> v;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        expected e;
        e.text = line;
        if (line == "*") {
            e.gap = true;
            v.push_back(e);
            continue;
        }
        std::istringstream s(line);
        std::string name, addr, old;
        int sized = 0, failed = 0;
        s >> name >> e.size >> addr >> old >> e.align_log2 >> sized >> failed;
        if (!s || !op_from_name(name, e.kind)) {
            fail("bad line in " + path + ": " + line);
            continue;
        }
        e.address = std::stoull(addr, nullptr, 16);
        e.old_address = std::stoull(old, nullptr, 16);
        e.sized = sized;
        e.failed = failed;
        v.push_back(e);
    }
    return v;
}

std::map<std::string, std::uint64_t> read_info(const std::string& path) {
    std::map<std::string, std::uint64_t> m;
    std::ifstream in(path);
    if (!in) fail("cannot read " + path);
    std::string k;
    std::uint64_t v;
    while (in >> k >> v) m[k] = v;
    return m;
}

bool same(const expected& x, const tr::event& e) {
    return x.kind == e.kind && x.size == e.size && x.address == e.address && x.align_log2 == e.align_log2 &&
           x.sized == e.sized && x.failed == e.failed && (x.kind != tr::op::realloc_ || x.old_address == e.old_address);
}

std::string show(const tr::event& e) {
    return std::string(tr::op_name(e.kind)) + " " + std::to_string(e.size) + " " + hex(e.address) + " " +
           hex(e.old_address) + " " + std::to_string(e.align_log2) + " " + (e.sized ? "1" : "0") + " " +
           (e.failed ? "1" : "0");
}

// Executable mappings of the traced program's own file, from MAPS.
struct range {
    std::uint64_t lo, hi;
};
std::vector<range> exe_text(const tr::trace& t) {
    std::vector<range> r;
    std::istringstream in(t.maps);
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream s(line);
        std::string span, perms, offset, dev, inode, path;
        s >> span >> perms >> offset >> dev >> inode;
        std::getline(s >> std::ws, path);
        if (perms.find('x') == std::string::npos || path != t.process.exe) continue;
        const auto dash = span.find('-');
        r.push_back({std::stoull(span.substr(0, dash), nullptr, 16), std::stoull(span.substr(dash + 1), nullptr, 16)});
    }
    return r;
}

// Events of each trace thread, as indices into t.events (in trace order).
std::map<std::uint32_t, std::vector<std::uint32_t>> by_thread(const tr::trace& t) {
    std::map<std::uint32_t, std::vector<std::uint32_t>> m;
    for (std::uint32_t i = 0; i < t.events.size(); ++i) m[t.events[i].thread].push_back(i);
    return m;
}

// Matches `want` against thread events `ev` from position `start`; "*" skips
// any events up to the next match. Fills `hit` with the matched indices.
bool match_from(const tr::trace& t, const std::vector<std::uint32_t>& ev, std::size_t start,
                const std::vector<expected>& want, std::vector<std::uint32_t>& hit, std::string& why) {
    hit.clear();
    std::size_t j = start;
    for (std::size_t k = 0; k < want.size(); ++k) {
        if (want[k].gap) {
            if (k + 1 == want.size()) return true;
            const expected& next = want[k + 1];
            while (j < ev.size() && !same(next, t.events[ev[j]])) ++j;
            continue;
        }
        if (j >= ev.size()) {
            why = "trace thread ends before expected event " + std::to_string(k) + " (" + want[k].text + ")";
            return false;
        }
        if (!same(want[k], t.events[ev[j]])) {
            why = "expected event " + std::to_string(k) + " '" + want[k].text + "', the trace has '" +
                  show(t.events[ev[j]]) + "'";
            return false;
        }
        hit.push_back(ev[j]);
        ++j;
    }
    return true;
}

void check_consistent(const tr::trace& t, const std::string& name, bool strict) {
    if (!t.complete) fail(name + ": no END record");
    if (t.end.events != t.events.size())
        fail(name + ": END counts " + std::to_string(t.end.events) + " events, the trace has " +
             std::to_string(t.events.size()));
    if (t.end.threads != t.threads.size())
        fail(name + ": END counts " + std::to_string(t.end.threads) + " threads, the blocks have " +
             std::to_string(t.threads.size()));
    std::uint64_t per_thread = 0;
    for (const auto& th : t.threads) per_thread += th.events;
    if (per_thread != t.events.size()) fail(name + ": thread totals differ from the event count");
    for (std::size_t i = 1; i < t.events.size(); ++i)
        if (t.events[i].time_ns < t.events[i - 1].time_ns) {
            fail(name + ": time goes backwards at event " + std::to_string(i));
            break;
        }
    if (t.maps.empty()) fail(name + ": no MAPS record");
    if (t.process.exe.empty() || t.process.args.empty()) fail(name + ": no executable or command line");
    const tr::timeline tl = tr::resolve(t);
    if (tl.reused_live) fail(name + ": " + std::to_string(tl.reused_live) + " allocations at a live address");
    if (strict && tl.unknown_frees) fail(name + ": " + std::to_string(tl.unknown_frees) + " frees of unknown addresses");
}

// Every expected.<tag> list of `tags` in `t`.
void check_lists(const tr::trace& t, const std::string& name, const std::string& dir,
                 const std::vector<std::string>& tags) {
    const auto threads = by_thread(t);
    const auto text = exe_text(t);
    if (text.empty()) fail(name + ": MAPS has no executable mapping of " + t.process.exe);
    std::map<std::uint32_t, std::string> owner;
    for (const auto& tag : tags) {
        const auto want = read_expected(dir + "/expected." + tag);
        if (want.empty() || want[0].gap) {
            fail("expected." + tag + " is empty");
            continue;
        }
        bool found = false;
        std::string why = "its first event " + want[0].text + " is not in the trace";
        std::vector<std::uint32_t> hit;
        for (const auto& [thread, ev] : threads) {
            for (std::size_t s = 0; s < ev.size() && !found; ++s) {
                if (!same(want[0], t.events[ev[s]])) continue;
                std::string w;
                if (match_from(t, ev, s, want, hit, w)) {
                    found = true;
                    if (owner.count(thread))
                        fail(name + ": tags " + owner[thread] + " and " + tag + " in the same thread " +
                             std::to_string(thread));
                    owner[thread] = tag;
                    if (tag == "main" && thread != 0) fail(name + ": the main thread is thread " + std::to_string(thread));
                } else {
                    why = w;
                }
            }
            if (found) break;
        }
        if (!found) {
            fail(name + ": expected." + tag + ": " + why);
            continue;
        }
        std::uint64_t prev = 0;
        for (auto i : hit) {
            const auto& e = t.events[i];
            if (e.time_ns < prev) fail(name + ": " + tag + ": time goes backwards");
            prev = e.time_ns;
            const bool inside = std::any_of(text.begin(), text.end(), [&](const range& r) { return e.site >= r.lo && e.site < r.hi; });
            if (!inside) {
                fail(name + ": " + tag + ": call site " + hex(e.site) + " of '" + show(e) + "' is not in " + t.process.exe);
                break;
            }
        }
        std::printf("%s: expected.%s: %zu events found in thread %u\n", name.c_str(), tag.c_str(), hit.size(),
                    t.events[hit.front()].thread);
    }
}

bool has_size(const tr::trace& t, std::uint64_t size) {
    return std::any_of(t.events.begin(), t.events.end(), [&](const tr::event& e) { return e.size == size; });
}

int check_expected(const std::string& path, const std::string& dir) {
    auto info = read_info(dir + "/info");
    const tr::trace t = tr::read_trace(path);
    check_consistent(t, path, true);
    if (t.process.pid != info["pid"]) fail(path + ": PROC pid " + std::to_string(t.process.pid) + ", the program's was " + std::to_string(info["pid"]));
    if (t.end.dropped) fail(path + ": " + std::to_string(t.end.dropped) + " events dropped");
    if (t.threads.size() != info["threads"])
        fail(path + ": " + std::to_string(t.threads.size()) + " threads, expected " + std::to_string(info["threads"]));
    if (info.count("min_blocks") && t.end.blocks < info["min_blocks"])
        fail(path + ": only " + std::to_string(t.end.blocks) + " blocks");
    std::vector<std::string> tags{"main"};
    if (info.count("child")) {
        for (int i = 0; i < 8; ++i) tags.push_back("w" + std::to_string(i));
        tags.push_back("by");
    }
    check_lists(t, path, dir, tags);
    std::printf("%s: %zu events, %zu threads, %llu blocks, pid %u\n", path.c_str(), t.events.size(), t.threads.size(),
                static_cast<unsigned long long>(t.end.blocks), t.process.pid);

    if (info.count("child")) {
        const std::string cpath = path + "." + std::to_string(info["child"]);
        tr::trace c;
        try {
            c = tr::read_trace(cpath);
        } catch (const tr::trace_error& e) {
            fail(std::string("the fork child's trace: ") + e.what());
            return 1;
        }
        check_consistent(c, cpath, false);
        if (c.process.pid != info["child"] || c.process.ppid != info["pid"])
            fail(cpath + ": PROC pid/ppid " + std::to_string(c.process.pid) + "/" + std::to_string(c.process.ppid));
        if (c.threads.size() != 1) fail(cpath + ": " + std::to_string(c.threads.size()) + " threads, expected 1");
        if (c.end.dropped) fail(cpath + ": events dropped");
        check_lists(c, cpath, dir, {"child"});
        // Separate traces: the parent's events (the bystander's were still in
        // its buffer at the fork) are not in the child's, nor the child's in the parent's.
        for (std::uint64_t s : {1000001ull, 1000002ull, 5000000ull, 3000000ull})
            if (has_size(c, s)) fail(cpath + ": holds a parent event of size " + std::to_string(s));
        if (has_size(t, 4000000) || has_size(t, 777)) fail(path + ": holds the fork child's events");
        std::printf("%s: %zu events, pid %u (parent %u)\n", cpath.c_str(), c.events.size(), c.process.pid, c.process.ppid);
    }
    return failures ? 1 : 0;
}

int check_truncated(const std::string& path) {
    try {
        tr::read_trace(path);
        fail(path + ": read without error, expected a truncated trace");
    } catch (const tr::trace_error& e) {
        if (std::string(e.what()).find("truncated") == std::string::npos)
            fail(path + ": expected a 'truncated' error, got: " + e.what());
        else std::printf("rejected as expected: %s\n", e.what());
    }
    try {
        const tr::trace t = tr::read_trace(path, tr::read_options{true});
        if (t.complete) fail(path + ": complete?");
        if (t.truncation.empty()) fail(path + ": no truncation reason");
        if (t.events.empty()) fail(path + ": no events before the cut");
        std::printf("allow_truncated: %zu events, %s\n", t.events.size(), t.truncation.c_str());
    } catch (const tr::trace_error& e) {
        fail(path + ": not readable with allow_truncated: " + e.what());
    }
    return failures ? 1 : 0;
}

int check_complete(const std::string& path, bool strict) {
    const tr::trace t = tr::read_trace(path);
    check_consistent(t, path, strict);
    if (t.events.empty()) fail(path + ": no events");
    std::printf("%s: %zu events, %zu threads, %llu blocks, %llu dropped, exe %s\n", path.c_str(), t.events.size(),
                t.threads.size(), static_cast<unsigned long long>(t.end.blocks),
                static_cast<unsigned long long>(t.end.dropped), t.process.exe.c_str());
    return failures ? 1 : 0;
}

} // namespace

int main(int argc, char** argv) {
    try {
        const std::string mode = argc > 2 ? argv[1] : "";
        if (mode == "expected" && argc == 4) return check_expected(argv[2], argv[3]);
        if (mode == "truncated" && argc == 3) return check_truncated(argv[2]);
        if (mode == "complete" && (argc == 3 || argc == 4))
            return check_complete(argv[2], argc == 4 && std::string(argv[3]) == "--strict");
    } catch (const std::exception& e) {
        std::fprintf(stderr, "FAIL: %s\n", e.what());
        return 1;
    }
    std::fputs("usage: tracer_check expected TRACE LOGDIR | truncated TRACE | complete TRACE [--strict]\n", stderr);
    return 2;
}
