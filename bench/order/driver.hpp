// The order benchmark's driver: runs one (workload, allocator, container,
// hint, layout) and prints one JSON line (fields in bench/README.md).
// Instantiated once per allocator family in run_<family>.cpp.
#pragma once
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <list>
#include <map>
#include <optional>
#include <set>
#include <string>

#include <allotheque/allocator.hpp>
#include <allotheque/request.hpp>
#include <allotheque/stl/hinted_list.hpp>
#include <allotheque/stl/hinted_map.hpp>
#include <allotheque/stl/hinted_set.hpp>

#include "common/policies.hpp"
#include "order/order.hpp"

namespace bench::order {

int drive_malloc(const options&);
int drive_packed(const options&);
int drive_velox(const options&);
int drive_medius(const options&);
int drive_room(const options&);
int drive_quickfit(const options&);
int drive_segregated(const options&);

// allocate(n, hint) / deallocate(p, n) over std::malloc, hints ignored: the
// policy the Olden runner uses.
using malloc_mem = bench::raw::malloc_policy;

// A heap over std::malloc (hints ignored), so the hinted containers can run on
// glibc, jemalloc, mimalloc, tcmalloc: what their node layout and code give
// without any placement.
struct malloc_heap {
    static constexpr std::size_t max_alignment = alignof(std::max_align_t);
    void* allocate(const allotheque::request& r) {
        void* p = std::malloc(r.size ? r.size : 1);
        if (!p) throw std::bad_alloc();
        return p;
    }
    void deallocate(void* p, const allotheque::request&) noexcept { std::free(p); }
};

// A tree hint policy that names nothing: the hinted containers placed by the
// heap's own fallback alone (bench baseline, not a library policy).
struct no_tree_hint {
    template <class N>
    static const void* hint(const N&) noexcept { return nullptr; }
};

// The same over an allotheque heap. A null hint becomes the heap's last
// allocation when `near_previous` is set: what allotheque::allocator's
// default policy does for these heaps.
template <class H>
struct heap_mem {
    H& h;
    bool near_previous;
    void* allocate(std::size_t n, const void* hint) {
        if (!hint && near_previous) hint = h.last_allocation();
        return h.allocate(allotheque::request{n, hint});
    }
    void deallocate(void* p, std::size_t n) noexcept { h.deallocate(p, allotheque::request{n}); }
};

using allotheque::tools::memory_probe;

inline bool tree_workload(const std::string& w) { return w == "map" || w == "set"; }
inline bool known_workload(const std::string& w) {
    return tree_workload(w) || w == "list" || w == "graph" || w == "scene";
}
// The benchmark's own structures (no library container, so no reorganize()).
inline bool own_structure(const std::string& w) { return w == "graph" || w == "scene"; }

// Prints the JSON line; `extra` is appended verbatim (", \"k\": v" pieces).
inline void print_result(const options& o, const std::string& allocator, const result& r, const memory_probe& m,
                         std::size_t peak_delta, const std::string& extra) {
    std::printf(
        "{\"workload\": \"%s\", \"allocator\": \"%s\", \"container\": \"%s\", \"hint\": \"%s\", \"layout\": \"%s\", "
        "\"malloc_library\": \"%s\", \"n\": %zu, \"lookups\": %zu, \"passes\": %d, \"roots\": %d, \"junk\": %d, "
        "\"build_ns\": %.3f, \"reorganize_ns\": %.3f, \"walk_ns\": %.3f, \"lookup_ns\": %.3f, \"bfs_ns\": %.3f, \"elements\": %zu, "
        "\"checksum\": \"0x%016llx\", \"same_line\": %.4f, \"within_256\": %.4f, \"same_page\": %.4f, \"ahead_256\": %.4f, "
        "\"rss_before_bytes\": %zu, \"peak_rss_delta_bytes\": %zu, \"hwm_reset\": %s%s}\n",
        o.workload.c_str(), allocator.c_str(), o.container.c_str(), o.hint.c_str(), o.layout.c_str(),
        allotheque::tools::malloc_library(), o.n, tree_workload(o.workload) ? o.lookups : std::size_t(0), o.passes,
        o.roots, o.junk, r.build_ns, r.reorganize_ns, r.walk_ns, r.lookup_ns, r.bfs_ns, r.elements,
        static_cast<unsigned long long>(r.checksum), r.same_line, r.within_256, r.same_page, r.ahead_256, m.rss_before,
        peak_delta, m.hwm_reset ? "true" : "false", extra.c_str());
    std::fflush(stdout);
}

inline int bad_option(const char* what, const std::string& v) {
    std::fprintf(stderr, "order: unknown %s '%s'\n", what, v.c_str());
    return 2;
}

// --reorganize 1 only means something for a hinted map, set or list.
inline int check_reorganize(const options& o) {
    if (!o.reorganize || (o.container == "hinted" && !own_structure(o.workload) && o.allocator != "packed")) return 0;
    std::fprintf(stderr, "order: --reorganize 1 needs a hinted map, set or list\n");
    return 2;
}

// What a run needs before its memory is measured: the input and the stream
// of unrelated allocations (with its bookkeeping reserved).
template <class JunkMem>
struct prepared {
    std::optional<tree_input> tree;
    std::optional<list_input> list;
    std::optional<graph_input> graph;
    junk_stream<JunkMem> junk;
    prepared(const options& o, JunkMem& m) : junk(m, o.junk, o.seed * 13 + 1) {
        if (o.workload == "graph") {
            graph.emplace(o);
            junk.reserve(graph->edges.size());
        } else if (o.workload == "list") {
            list.emplace(o);
            junk.reserve(list->values.size());
        } else if (o.workload == "scene") {
            junk.reserve(o.n + 3 * o.edits);
        } else {
            tree.emplace(o);
            junk.reserve(tree->keys.size());
        }
    }
};

template <class Container, class JunkMem>
result run_tree_in(Container c, prepared<JunkMem>& p, const options& o) {
    return run_tree(c, p.junk, *p.tree, o);
}

// One heap family: std containers through allotheque::allocator (near_previous),
// the hinted containers with each tree hint, hinted_list, the graph plain or
// hinted.
template <class H, class... Args>
int drive_heap(const options& o, const char* label, const Args&... args) {
    using u64 = std::uint64_t;
    using pair_alloc = allotheque::allocator<std::pair<const u64, u64>, H>;
    using key_alloc = allotheque::allocator<u64, H>;
    if (o.layout != "shared" && o.layout != "isolated") return bad_option("layout", o.layout);
    if (o.container != "std" && o.container != "hinted") return bad_option("container", o.container);
    if (!known_workload(o.workload)) return bad_option("workload", o.workload);
    if (o.container == "hinted" && o.workload == "graph" && o.hint != "source") return bad_option("graph hint", o.hint);
    if (o.container == "hinted" && o.workload == "scene" && o.hint != "parent") return bad_option("scene hint", o.hint);
    if (o.container == "hinted" && o.workload == "list" && o.hint != "predecessor")
        return bad_option("list hint (hinted_list: predecessor)", o.hint);
    if (int e = check_reorganize(o)) return e;
    if (o.container == "hinted" && tree_workload(o.workload) && o.hint != "parent" && o.hint != "predecessor" &&
        o.hint != "successor" && o.hint != "none")
        return bad_option("tree hint", o.hint);
    H junk_heap(args...), own_heap(args...);
    H& h = o.layout == "isolated" ? own_heap : junk_heap;
    heap_mem<H> junk_mem{junk_heap, false};
    auto os = [&](auto f) { return f(junk_heap.stats()) + (&h != &junk_heap ? f(h.stats()) : 0); };
    prepared<heap_mem<H>> p(o, junk_mem);
    const std::size_t os_before = os([](const auto& s) { return s.os_bytes; });
    memory_probe mem;
    mem.start();
    result r;
    const bool map = o.workload == "map";
    auto hinted = [&]<class Hint>() {
        if (map) r = run_tree_in(allotheque::hinted_map<u64, u64, std::less<>, H, Hint>(h), p, o);
        else r = run_tree_in(allotheque::hinted_set<u64, std::less<>, H, Hint>(h), p, o);
    };
    if (o.workload == "graph") {
        heap_mem<H> m{h, true};
        r = run_graph(m, p.junk, *p.graph, o.container == "hinted");
    } else if (o.workload == "scene") {
        heap_mem<H> m{h, true};
        r = run_scene(m, p.junk, o, o.container == "hinted");
    } else if (o.workload == "list") {
        if (o.container == "std") {
            std::list<u64, key_alloc> l{key_alloc(h)};
            r = run_list(l, p.junk, *p.list, o);
        } else {
            allotheque::hinted_list<u64, H> l(h);
            r = run_list(l, p.junk, *p.list, o);
        }
    } else if (o.container == "std") {
        if (map) r = run_tree_in(std::map<u64, u64, std::less<>, pair_alloc>(pair_alloc(h)), p, o);
        else r = run_tree_in(std::set<u64, std::less<>, key_alloc>(key_alloc(h)), p, o);
    } else if (o.hint == "parent") {
        hinted.template operator()<allotheque::tree_hint::parent>();
    } else if (o.hint == "predecessor") {
        hinted.template operator()<allotheque::tree_hint::predecessor>();
    } else if (o.hint == "none") {
        hinted.template operator()<no_tree_hint>();
    } else {
        hinted.template operator()<allotheque::tree_hint::successor>();
    }
    const std::size_t peak = mem.peak_delta();
    char extra[256];
    std::snprintf(extra, sizeof extra, ", \"heap_os_bytes_before\": %zu, \"heap_peak_os_bytes\": %zu", os_before,
                  os([](const auto& s) { return s.peak_os_bytes; }));
    std::string more = extra;
    if constexpr (requires { junk_heap.placement(); }) {
        const auto a = junk_heap.placement();
        const auto b = &h != &junk_heap ? h.placement() : decltype(a){};
        std::snprintf(extra, sizeof extra, ", \"room_hinted\": %zu, \"room_at_hint\": %zu, \"room_foreign\": %zu",
                      a.hinted + b.hinted, a.at_hint + b.at_hint, a.foreign + b.foreign);
        more += extra;
    }
    print_result(o, label, r, mem, peak, more);
    return 0;
}

} // namespace bench::order
