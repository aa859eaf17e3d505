// The order benchmark over malloc: std containers with std::allocator (the
// same binary under LD_PRELOAD for jemalloc, mimalloc, tcmalloc), and the
// packed reference.
#include "order/driver.hpp"

namespace bench::order {

namespace {
int check_plain(const options& o) {
    if (o.layout != "shared") return bad_option("layout (malloc has one heap)", o.layout);
    if (!known_workload(o.workload)) return bad_option("workload", o.workload);
    return check_reorganize(o);
}
} // namespace

int drive_malloc(const options& o) {
    // The name says which malloc must be active; refuse to record a wrong baseline.
    const std::string active = allotheque::tools::malloc_library();
    if (o.allocator != "malloc" && o.allocator != active) {
        std::fprintf(stderr, "order: allocator '%s' requested but the active malloc is '%s' (LD_PRELOAD?)\n",
                     o.allocator.c_str(), active.c_str());
        return 3;
    }
    if (int e = check_plain(o)) return e;
    const bool hinted = o.container == "hinted";
    if (!hinted && o.container != "std") return bad_option("container", o.container);
    if (hinted && (own_structure(o.workload) || o.hint != "none"))
        return bad_option("hinted container on malloc (map, set or list, --hint none: malloc takes no hint)", o.hint);
    malloc_mem m;
    malloc_heap mh;
    prepared<malloc_mem> p(o, m);
    memory_probe mem;
    mem.start();
    result r;
    if (o.workload == "graph") r = run_graph(m, p.junk, *p.graph, false);
    else if (o.workload == "scene") r = run_scene(m, p.junk, o, false);
    else if (o.workload == "list" && hinted) {
        allotheque::hinted_list<u64, malloc_heap> l(mh);
        r = run_list(l, p.junk, *p.list, o);
    } else if (o.workload == "list") {
        std::list<u64> l;
        r = run_list(l, p.junk, *p.list, o);
    } else if (hinted && o.workload == "map") r = run_tree_in(allotheque::hinted_map<u64, u64, std::less<>, malloc_heap, no_tree_hint>(mh), p, o);
    else if (hinted) r = run_tree_in(allotheque::hinted_set<u64, std::less<>, malloc_heap, no_tree_hint>(mh), p, o);
    else if (o.workload == "map") r = run_tree_in(std::map<u64, u64>(), p, o);
    else r = run_tree_in(std::set<u64>(), p, o);
    print_result(o, active, r, mem, mem.peak_delta(), "");
    return 0;
}

int drive_packed(const options& o) {
    if (int e = check_plain(o)) return e;
    malloc_mem m;
    prepared<malloc_mem> p(o, m);
    memory_probe mem;
    mem.start();
    const result r = o.workload == "graph"  ? run_graph_packed(m, p.junk, *p.graph)
                     : o.workload == "scene" ? run_scene_packed(m, p.junk, o)
                     : o.workload == "list" ? run_list_packed(p.junk, *p.list, o)
                                            : run_tree_packed(p.junk, *p.tree, o);
    print_result(o, "packed", r, mem, mem.peak_delta(), "");
    return 0;
}

} // namespace bench::order
