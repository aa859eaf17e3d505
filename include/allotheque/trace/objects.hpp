// Pairs a trace's allocations with their frees: every allocation becomes an
// object with a size, a call site and a lifetime. The summariser and the
// replayer both work on objects, never on raw addresses.
//
// Anomalies are counted, not fatal: a free of an address never handed out
// (memory from before the tracer started, or a program bug), an allocation at
// an address still live (a lost free) — the older object is closed there.
#ifndef ALLOTHEQUE_TRACE_OBJECTS_HPP
#define ALLOTHEQUE_TRACE_OBJECTS_HPP

#include <cstdint>
#include <limits>
#include <unordered_map>
#include <vector>

#include "reader.hpp"

namespace allotheque::trace {

inline constexpr std::uint32_t no_object = std::numeric_limits<std::uint32_t>::max();
inline constexpr std::uint64_t still_live = std::numeric_limits<std::uint64_t>::max();

struct object {
    std::uint64_t address = 0;  // in the traced run
    std::uint64_t size = 0;
    std::uint64_t site = 0;
    std::uint64_t born_ns = 0;
    std::uint64_t died_ns = still_live;
    std::uint32_t born_event = 0;
    std::uint32_t died_event = no_object;  // event index, or no_object if never freed
    std::uint32_t thread = 0;
    std::uint8_t align_log2 = 0;
};

struct timeline {
    std::vector<object> objects;
    // Per event: the object it creates and the object it ends (no_object when
    // none); a realloc does both.
    std::vector<std::uint32_t> born, ended;
    std::uint64_t unknown_frees = 0;  // free of an address not live in the trace
    std::uint64_t null_frees = 0;
    std::uint64_t failed = 0;         // allocations that returned null
    std::uint64_t reused_live = 0;    // allocation at a still-live address
};

inline timeline resolve(const trace& t) {
    timeline r;
    const std::size_t n = t.events.size();
    r.born.assign(n, no_object);
    r.ended.assign(n, no_object);
    std::unordered_map<std::uint64_t, std::uint32_t> live;
    live.reserve(1024);
    auto end_object = [&](std::uint64_t address, std::uint32_t i) {
        auto it = live.find(address);
        if (it == live.end()) {
            ++r.unknown_frees;
            return;
        }
        object& o = r.objects[it->second];
        o.died_ns = t.events[i].time_ns;
        o.died_event = i;
        r.ended[i] = it->second;
        live.erase(it);
    };
    for (std::uint32_t i = 0; i < n; ++i) {
        const event& e = t.events[i];
        if (is_free(e.kind)) {
            if (e.address == 0) ++r.null_frees;
            else end_object(e.address, i);
            continue;
        }
        if (e.failed) {
            ++r.failed;
            continue;
        }
        if (e.kind == op::realloc_ && e.old_address != 0) {
            end_object(e.old_address, i);
            if (e.address == 0) continue;  // realloc(p, 0) freed p
        }
        if (e.address == 0) continue;
        if (auto it = live.find(e.address); it != live.end()) {
            ++r.reused_live;
            r.objects[it->second].died_ns = e.time_ns;
            r.objects[it->second].died_event = i;
            live.erase(it);
        }
        const auto id = static_cast<std::uint32_t>(r.objects.size());
        r.objects.push_back(object{e.address, e.size, e.site, e.time_ns, still_live, i, no_object, e.thread, e.align_log2});
        r.born[i] = id;
        live.emplace(e.address, id);
    }
    return r;
}

} // namespace allotheque::trace

#endif
