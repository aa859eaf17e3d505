// Trace -> replay plan (docs/trace.md, "Replay").
//
// A plan is the trace reduced to what an allocator sees, in the trace's global
// time order: alloc / free / realloc of objects, each object living in a
// *slot* (an index into the replayer's pointer table; a slot is reused once
// its object is freed, so the table holds the peak number of live objects, not
// every object ever made). Everything about original addresses is settled
// here, off the clock:
//
//   * hints. The object a program links a new one to usually sits next to it
//     in the traced run's address space. For each allocation the planner picks
//     the live object whose ORIGINAL address is nearest below the new object's
//     original address (else the nearest above; none when nothing is live) and
//     records that object's slot: the replay passes the slot's REPLAY address
//     as the hint, i.e. "near the object the original program put next to it".
//     A realloc is hinted with its own old block.
//   * anomalies. Frees of addresses never handed out (unknown, or NULL) are
//     dropped; failed allocations are skipped; an allocation at a still-live
//     address (a lost free) first frees the older object; objects never freed
//     stay allocated to the end.
//
// Planning is deterministic (std::map over live addresses, LIFO slot reuse).
// The plan serialises to a flat file (header + 24-byte ops) that
// allotheque-replay-worker loads before it starts measuring.
#ifndef ALLOTHEQUE_TOOLS_TRACE_REPLAY_PLAN_HPP
#define ALLOTHEQUE_TOOLS_TRACE_REPLAY_PLAN_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <allotheque/trace/objects.hpp>
#include <allotheque/trace/reader.hpp>

namespace allotheque::tools::replay {

inline constexpr std::uint32_t no_slot = std::numeric_limits<std::uint32_t>::max();
inline constexpr std::uint32_t no_object = allotheque::trace::no_object;
// Sizes at or above this are not replayable (the worker packs size and
// alignment in one word); no allocator could serve them anyway.
inline constexpr std::uint64_t max_replay_size = (std::uint64_t(1) << 56) - 1;

// How much of each object the replay writes, so that the resident set grows
// as the program's did (the trace does not say which bytes a program used):
// its first and last cache lines, and one byte per page of its first
// `touch_limit` bytes. Beyond that an object is taken to be untouched — a
// buffer reserved large and barely used costs a real program nothing there
// either, under any allocator. touch_all: every page.
inline constexpr std::uint64_t default_touch_limit = std::uint64_t(1) << 20;
inline constexpr std::uint64_t touch_all = std::numeric_limits<std::uint64_t>::max();

// The bytes of an n-byte object that the replay writes (or reads): all of a
// small one; of a big one, its first `limit` bytes and its last cache line.
constexpr std::uint64_t touched_bytes(std::uint64_t n, std::uint64_t limit) noexcept {
    return n <= limit ? n : limit + (n - limit < 64 ? n - limit : 64);
}

// "all", or a byte count with an optional K, M or G (binary) suffix; false if
// malformed.
inline bool parse_touch_limit(const std::string& s, std::uint64_t& out) {
    if (s == "all") {
        out = touch_all;
        return true;
    }
    std::uint64_t v = 0;
    std::size_t i = 0;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
        if (v > (touch_all - 9) / 10) return false;
        v = v * 10 + std::uint64_t(s[i] - '0');
    }
    if (i == 0) return false;
    unsigned shift = 0;
    if (i + 1 == s.size()) {
        const char u = s[i];
        shift = u == 'K' || u == 'k' ? 10 : u == 'M' || u == 'm' ? 20 : u == 'G' || u == 'g' ? 30 : 99;
        if (shift == 99) return false;
    } else if (i != s.size()) {
        return false;
    }
    if (shift && v > (touch_all >> shift)) return false;
    out = v << shift;
    return true;
}

enum class op_kind : std::uint8_t { alloc = 1, free = 2, realloc = 3 };

// One step of the replay: 24 bytes, the same in memory and in the plan file.
struct plan_op {
    op_kind kind = op_kind::alloc;
    std::uint8_t align_log2 = 0;  // alloc/realloc: requested alignment (0 = default)
    std::uint16_t reserved = 0;
    std::uint32_t slot = no_slot;   // alloc: the new object's slot; free: the freed one's; realloc: the old one's
    std::uint32_t other = no_slot;  // alloc: the hint object's slot (or no_slot); realloc: the new slot; free: no_slot
    std::uint32_t object = no_object;  // trace object id: created (alloc/realloc) or freed (free)
    std::uint64_t size = 0;            // alloc/realloc: new size; free: the object's size
};
static_assert(sizeof(plan_op) == 24);

struct plan_stats {
    std::uint64_t events = 0;        // trace events read
    std::uint64_t allocs = 0, frees = 0, reallocs = 0;
    std::uint64_t hinted = 0;        // allocations with a neighbour hint
    std::uint64_t unknown_frees = 0, null_frees = 0, failed = 0;
    std::uint64_t lost_frees = 0;    // allocation at a still-live address: the older object freed there
    std::uint64_t never_freed = 0;   // objects live at the end of the trace
    std::uint64_t aligned = 0;       // allocations with an explicit alignment
    std::uint64_t threads = 0;       // replayed on one thread, in global time order
};

struct plan {
    std::vector<plan_op> ops;
    // Per op: alloc -> the hint's object id; realloc -> the old object id;
    // free -> no_object. Only in memory (tests, diagnostics), not serialised.
    std::vector<std::uint32_t> aux;
    std::uint32_t objects = 0;          // objects created
    std::uint32_t slots = 0;            // peak live objects = pointer table size
    std::uint64_t peak_requested_bytes = 0;  // peak of live requested bytes over the replay
    std::uint64_t peak_touched_bytes = 0;    // peak of the live bytes the replay writes (touched_bytes)
    std::uint64_t touch_limit = default_touch_limit;  // how much of each object the worker writes
    plan_stats stats;
};

class plan_error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Builds the plan of a parsed trace (`tl` = resolve(t)); `touch_limit` is
// the worker's, for peak_touched_bytes.
inline plan make_plan(const allotheque::trace::trace& t, const allotheque::trace::timeline& tl,
                      std::uint64_t touch_limit = default_touch_limit) {
    namespace tr = allotheque::trace;
    plan p;
    p.touch_limit = touch_limit;
    p.stats.events = t.events.size();
    p.stats.unknown_frees = tl.unknown_frees;
    p.stats.null_frees = tl.null_frees;
    p.stats.failed = tl.failed;
    p.stats.threads = t.threads.size();
    if (tl.objects.size() >= no_object) throw plan_error("trace has too many objects to replay (2^32)");
    p.objects = static_cast<std::uint32_t>(tl.objects.size());
    p.ops.reserve(t.events.size());
    p.aux.reserve(t.events.size());

    std::map<std::uint64_t, std::uint32_t> live;  // original address -> object
    std::vector<std::uint32_t> slot_of(tl.objects.size(), no_slot);
    std::vector<std::uint32_t> free_slots;          // LIFO: deterministic, reuses hot slots
    std::uint64_t live_bytes = 0, live_touched = 0;

    auto take_slot = [&]() -> std::uint32_t {
        if (!free_slots.empty()) {
            const auto s = free_slots.back();
            free_slots.pop_back();
            return s;
        }
        if (p.slots == no_slot - 1) throw plan_error("trace has too many live objects to replay (2^32)");
        return p.slots++;
    };
    // Ends `id`: drops it from the live map, returns its slot.
    auto end_object = [&](std::uint32_t id) -> std::uint32_t {
        const tr::object& o = tl.objects[id];
        auto it = live.find(o.address);
        if (it == live.end() || it->second != id || slot_of[id] == no_slot)
            throw plan_error("inconsistent timeline: object " + std::to_string(id) + " ended but not live");
        live.erase(it);
        live_bytes -= o.size;
        live_touched -= touched_bytes(o.size, touch_limit);
        const auto s = slot_of[id];
        slot_of[id] = no_slot;
        return s;
    };
    auto emit_free = [&](std::uint32_t id) {
        const auto s = end_object(id);
        free_slots.push_back(s);
        p.ops.push_back(plan_op{op_kind::free, tl.objects[id].align_log2, 0, s, no_slot, id, tl.objects[id].size});
        p.aux.push_back(no_object);
        ++p.stats.frees;
    };
    auto check_size = [&](const tr::object& o, std::uint32_t i) {
        if (o.size > max_replay_size)
            throw plan_error("event " + std::to_string(i) + ": size " + std::to_string(o.size) + " is not replayable");
    };
    // The live object nearest below `a` in the traced run, else nearest above.
    auto neighbour = [&](std::uint64_t a) -> std::uint32_t {
        if (live.empty()) return no_object;
        auto it = live.lower_bound(a);  // first >= a (a itself is not live here)
        if (it != live.begin()) return std::prev(it)->second;
        return it->second;
    };

    const std::size_t n = t.events.size();
    if (tl.born.size() != n || tl.ended.size() != n) throw plan_error("timeline does not match the trace");
    for (std::uint32_t i = 0; i < n; ++i) {
        const std::uint32_t born = tl.born[i], ended = tl.ended[i];
        if (born == no_object) {
            if (ended != no_object) emit_free(ended);  // free, delete, or realloc(p, 0)
            continue;
        }
        if (born >= tl.objects.size()) throw plan_error("timeline refers to an unknown object");
        const tr::object& o = tl.objects[born];
        check_size(o, i);
        // realloc: the old object ends first (an in-place realloc reuses its address).
        const std::uint32_t old_slot = ended != no_object ? end_object(ended) : no_slot;
        // A lost free: something still live at this address (the timeline
        // closed it here without a free event): free it first.
        if (auto it = live.find(o.address); it != live.end()) {
            emit_free(it->second);
            ++p.stats.lost_frees;
        }
        if (ended != no_object) {
            // realloc: old object -> new object, hinted with its old block.
            const auto new_slot = take_slot();  // never the old slot: both live during the copy
            free_slots.push_back(old_slot);
            slot_of[born] = new_slot;
            live.emplace(o.address, born);
            live_bytes += o.size;
            live_touched += touched_bytes(o.size, touch_limit);
            p.ops.push_back(plan_op{op_kind::realloc, o.align_log2, 0, old_slot, new_slot, born, o.size});
            p.aux.push_back(ended);
            ++p.stats.reallocs;
        } else {
            const std::uint32_t h = neighbour(o.address);
            const auto s = take_slot();
            slot_of[born] = s;
            live.emplace(o.address, born);
            live_bytes += o.size;
            live_touched += touched_bytes(o.size, touch_limit);
            p.ops.push_back(plan_op{op_kind::alloc, o.align_log2, 0, s, h == no_object ? no_slot : slot_of[h], born, o.size});
            p.aux.push_back(h);
            ++p.stats.allocs;
            if (h != no_object) ++p.stats.hinted;
            if (o.align_log2) ++p.stats.aligned;
        }
        p.peak_requested_bytes = std::max(p.peak_requested_bytes, live_bytes);
        p.peak_touched_bytes = std::max(p.peak_touched_bytes, live_touched);
    }
    p.stats.never_freed = live.size();
    return p;
}

inline plan make_plan(const allotheque::trace::trace& t, std::uint64_t touch_limit = default_touch_limit) {
    return make_plan(t, allotheque::trace::resolve(t), touch_limit);
}

// --- The plan file ---------------------------------------------------------
// 64-byte header, then `ops` plan_op records (native byte order: a plan is a
// temporary file between two processes of one machine).
inline constexpr char plan_magic[8] = {'A', 'T', 'Q', 'P', 'L', 'A', 'N', '1'};

struct plan_header {
    char magic[8] = {};
    std::uint32_t version = 2;  // 2: touch limit and touched peak
    std::uint32_t op_bytes = sizeof(plan_op);
    std::uint64_t ops = 0;
    std::uint64_t slots = 0;
    std::uint64_t objects = 0;
    std::uint64_t peak_requested_bytes = 0;
    std::uint64_t peak_touched_bytes = 0;
    std::uint64_t touch_limit = 0;
};
static_assert(sizeof(plan_header) == 64);

inline plan_header header_of(const plan& p) {
    plan_header h;
    std::memcpy(h.magic, plan_magic, sizeof plan_magic);
    h.ops = p.ops.size();
    h.slots = p.slots;
    h.objects = p.objects;
    h.peak_requested_bytes = p.peak_requested_bytes;
    h.peak_touched_bytes = p.peak_touched_bytes;
    h.touch_limit = p.touch_limit;
    return h;
}

// Checks a header read from a file of `file_bytes` bytes; returns "" if valid.
inline std::string check_header(const plan_header& h, std::uint64_t file_bytes) {
    if (file_bytes < sizeof(plan_header)) return "not a replay plan (file shorter than its header)";
    if (std::memcmp(h.magic, plan_magic, sizeof plan_magic) != 0) return "not a replay plan (bad magic number)";
    if (h.version != 2) return "replay plan version " + std::to_string(h.version) + " is not supported";
    if (h.op_bytes != sizeof(plan_op)) return "replay plan has " + std::to_string(h.op_bytes) + "-byte ops";
    if (h.slots >= no_slot) return "replay plan has too many slots";
    if (h.ops > (file_bytes - sizeof(plan_header)) / sizeof(plan_op) ||
        file_bytes != sizeof(plan_header) + h.ops * sizeof(plan_op))
        return "replay plan size does not match its header (" + std::to_string(file_bytes) + " bytes for " +
               std::to_string(h.ops) + " ops)";
    return {};
}

// Checks one op against the slot occupancy the replay would have; returns ""
// if valid. `filled` has one flag per slot (size(), operator[]) and is
// updated: a std::vector<bool>, or flags the worker keeps off the heap so
// that checking a plan leaves the malloc under test as a program finds it.
template <class Flags>
std::string check_op(const plan_op& o, Flags& filled) {
    const std::size_t n = filled.size();
    auto bad = [&](const char* what) { return std::string(what); };
    switch (o.kind) {
        case op_kind::alloc:
            if (o.slot >= n || filled[o.slot]) return bad("alloc into a used or out-of-range slot");
            if (o.other != no_slot && (o.other >= n || !filled[o.other])) return bad("alloc hinted with an empty slot");
            if (o.size > max_replay_size || o.align_log2 > 62) return bad("alloc size or alignment out of range");
            filled[o.slot] = true;
            return {};
        case op_kind::free:
            if (o.slot >= n || !filled[o.slot]) return bad("free of an empty or out-of-range slot");
            filled[o.slot] = false;
            return {};
        case op_kind::realloc:
            if (o.slot >= n || !filled[o.slot]) return bad("realloc of an empty or out-of-range slot");
            if (o.other >= n || filled[o.other]) return bad("realloc into a used or out-of-range slot");
            if (o.size > max_replay_size || o.align_log2 > 62) return bad("realloc size or alignment out of range");
            filled[o.slot] = false;
            filled[o.other] = true;
            return {};
    }
    return bad("unknown op kind");
}

// Writes the plan; throws plan_error on an I/O error.
inline void write_plan(const plan& p, const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) throw plan_error("cannot write replay plan '" + path + "'");
    const plan_header h = header_of(p);
    bool ok = std::fwrite(&h, sizeof h, 1, f) == 1;
    if (ok && !p.ops.empty()) ok = std::fwrite(p.ops.data(), sizeof(plan_op), p.ops.size(), f) == p.ops.size();
    ok = (std::fclose(f) == 0) && ok;
    if (!ok) throw plan_error("cannot write replay plan '" + path + "' (disk full?)");
}

} // namespace allotheque::tools::replay

#endif
