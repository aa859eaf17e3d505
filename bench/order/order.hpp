// Allocation order ≠ traversal order (issue 14, item 3). One (workload,
// allocator, container) per process, one JSON line; bench/README.md documents
// the fields and bench/run.py's "order" section drives it.
//
//   map / set  N distinct random 64-bit keys inserted in random order into an
//              ordered map (u64 -> u64) or set (u64), one unrelated allocation of
//              16-128 B after each insert (a quarter kept to the end, the rest
//              freed later in random order), then timed: `passes` in-order walks
//              and `lookups` random lookups of present keys.
//   list       N values, each inserted right after a random one of those
//              inserted before it (so list order is unrelated to allocation
//              order), one unrelated allocation after each insert; timed:
//              `passes` walks front to back.
//   graph      N nodes, 8 out-edges each (7 in 8 to a node within ±32 ids, 1 in 8
//              to any node), the edges added in random order: a node is created
//              when first named, each edge is a 16-byte cell pushed on its source
//              node's list, one unrelated allocation after each edge. Timed:
//              breadth-first searches from `roots` fixed nodes.
//   scene      a tree of N 32-byte nodes (a scene graph, an AST), each added as
//              the first child of a random earlier node, then aged by `edits`
//              edits, each replacing a random node's descendants (at most 64)
//              by about as many new ones; one unrelated allocation after each
//              new node. Timed: `passes` depth-first walks.
//
// The structure and the unrelated allocations share one allocator unless the
// layout is `isolated` (two heaps). Everything random is a fixed splitmix64
// stream, so every allocator sees the same sequence and the checksums agree.
#pragma once
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <list>
#include <map>
#include <new>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "olden/rng.hpp"
#include "process_memory.hpp"

namespace bench::order {

using u64 = std::uint64_t;
using bench::olden::mix64;
using bench::olden::rng;

struct options {
    std::string workload = "map";   // map | set | list | graph | scene
    std::string allocator;          // glibc | jemalloc | mimalloc | tcmalloc | velox | medius | packed
    std::string container = "std";  // std | hinted (heaps only)
    std::string hint;               // hinted trees: parent (default) | predecessor | successor | none;
                                    // hinted list: predecessor; hinted graph: source
    std::string layout = "shared";  // shared | isolated (heaps only: the structure on its own heap)
    std::size_t n = 1'000'000;
    std::size_t lookups = 1'000'000;
    int passes = 4;
    int roots = 4;
    int junk = 1;   // unrelated allocations per insert / edge
    std::size_t edits = ~std::size_t(0);   // scene: edits after the build (default, the sentinel: n / 2)
    u64 seed = 1;
    unsigned fill = 25;         // room: % of a group foreign blocks may fill (25, 50, 100)
    bool reorganize = false;    // hinted trees and lists: reorganize() after the build (timed apart)
};

// What one run measured. Times are medians over passes / roots.
struct result {
    double build_ns = 0;    // per insert (map, set) or per edge (graph), unrelated allocations included
    double reorganize_ns = 0;   // per node, the hinted containers' reorganize() (0: not run)
    double walk_ns = 0;     // per node, one in-order pass (map, set, list)
    double lookup_ns = 0;   // per lookup
    double bfs_ns = 0;      // per edge scanned
    u64 checksum = 0;
    std::size_t elements = 0;   // nodes (map, set, list) or edges scanned per search (graph)
    // Placement, read after the timed phases: the share of in-order neighbours
    // (map, set, list) or of consecutive edge cells of one node (graph) that share
    // a 64-byte line, lie within 256 bytes, share a 4 KiB page.
    // ahead_256: the second of the pair lies after the first, within 256 bytes
    // (what a hardware stream prefetcher follows).
    double same_line = 0, within_256 = 0, same_page = 0, ahead_256 = 0;
};

// The thread's CPU time: on a machine shared with other work it leaves out the
// time this process waits for a core (cache and TLB pollution by the others
// remains). Every phase is memory-bound and single-threaded, so on a quiet
// machine it equals the wall time.
inline double now_s() {
    timespec t{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// Nanoseconds per item since t0 (seconds, now_s()), for n items (at least one).
inline double ns_per(double t0, std::size_t n) {
    return (now_s() - t0) * 1e9 / static_cast<double>(std::max<std::size_t>(1, n));
}

inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t k = v.size();
    return k == 0 ? 0 : k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
}

// Counts address pairs by distance for the placement columns.
struct adjacency_count {
    std::size_t pairs = 0, line = 0, near = 0, page = 0, ahead = 0;
    void add(const void* a, const void* b) noexcept {
        const auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
        ++pairs;
        ahead += y > x && y - x < 256;
        line += (x >> 6) == (y >> 6);
        near += (x > y ? x - y : y - x) < 256;
        page += (x >> 12) == (y >> 12);
    }
    void store(result& r) const noexcept {
        const double d = pairs ? static_cast<double>(pairs) : 1.0;
        r.same_line = static_cast<double>(line) / d;
        r.within_256 = static_cast<double>(near) / d;
        r.same_page = static_cast<double>(page) / d;
        r.ahead_256 = static_cast<double>(ahead) / d;
    }
};

// ---------------------------------------------------------------------------
// Unrelated allocations: through a memory policy P (allocate(n, hint),
// deallocate(p, n)), one per step, 16-128 B. A quarter live to the end; the
// rest enter a pool of 4096 and a random pool entry is freed when it is full.
// ---------------------------------------------------------------------------
template <class P>
class junk_stream {
public:
    junk_stream(P& p, int per_step, u64 seed) : p_(p), per_step_(per_step), rng_(seed) { pool_.reserve(pool_cap); }
    junk_stream(const junk_stream&) = delete;
    junk_stream& operator=(const junk_stream&) = delete;
    ~junk_stream() { release(); }

    void step() {
        for (int i = 0; i < per_step_; ++i) {
            const auto s = static_cast<std::uint32_t>(16 + rng_.below(113));
            void* q = p_.allocate(s, nullptr);
            static_cast<char*>(q)[0] = 1;   // touched, like a real object
            if (rng_.below(4) == 0) {
                kept_.emplace_back(q, s);
            } else if (pool_.size() < pool_cap) {
                pool_.emplace_back(q, s);
            } else {
                auto& slot = pool_[rng_.below(pool_cap)];
                p_.deallocate(slot.first, slot.second);
                slot = {q, s};
            }
        }
    }
    void reserve(std::size_t steps) { kept_.reserve(steps * static_cast<std::size_t>(per_step_) / 3 + 64); }
    void release() noexcept {
        for (auto* v : {&pool_, &kept_}) {
            for (auto& [q, s] : *v) p_.deallocate(q, s);
            v->clear();
        }
    }

private:
    static constexpr std::size_t pool_cap = 4096;
    P& p_;
    int per_step_;
    rng rng_;
    std::vector<std::pair<void*, std::uint32_t>> pool_, kept_;
};

// ---------------------------------------------------------------------------
// The "packed" reference: a bump arena filled in traversal order.
// ---------------------------------------------------------------------------
class arena {
public:
    explicit arena(std::size_t bytes) : bytes_(bytes) {
        void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) throw std::bad_alloc();
        base_ = static_cast<char*>(p);
    }
    arena(const arena&) = delete;
    arena& operator=(const arena&) = delete;
    ~arena() { ::munmap(base_, bytes_); }
    void* allocate(std::size_t n, const void* = nullptr) {
        used_ = (used_ + 7) & ~std::size_t(7);
        if (used_ + n > bytes_) throw std::bad_alloc();
        void* p = base_ + used_;
        used_ += n;
        return p;
    }
    void deallocate(void*, std::size_t) noexcept {}

private:
    char* base_;
    std::size_t bytes_, used_ = 0;
};

template <class T>
struct bump_allocator {
    using value_type = T;
    arena* a;
    explicit bump_allocator(arena& x) noexcept : a(&x) {}
    template <class U>
    bump_allocator(const bump_allocator<U>& o) noexcept : a(o.a) {}
    T* allocate(std::size_t n) { return static_cast<T*>(a->allocate(n * sizeof(T))); }
    void deallocate(T*, std::size_t) noexcept {}
    template <class U>
    bool operator==(const bump_allocator<U>& o) const noexcept { return a == o.a; }
};

// ---------------------------------------------------------------------------
// map / set
// ---------------------------------------------------------------------------
inline u64 value_of(u64 k) noexcept { return k * 0x9e3779b97f4a7c15ULL + 1; }

template <class C>
constexpr bool is_map = requires { typename C::mapped_type; };

template <class C>
void insert_key(C& c, u64 k) {
    if constexpr (is_map<C>) c.insert({k, value_of(k)});
    else c.insert(k);
}
template <class E>
u64 payload(const E& e) noexcept {
    if constexpr (requires { e.second; }) return e.second;
    else return e;
}

// The keys, distinct (mix64 is a bijection), in insertion order; and the
// lookup probes, present keys in random order.
struct tree_input {
    std::vector<u64> keys, probes;
    tree_input(const options& o) : keys(o.n), probes(o.lookups) {
        for (std::size_t i = 0; i < o.n; ++i) keys[i] = mix64(i ^ (o.seed << 40));
        rng r(o.seed * 7 + 3);
        for (auto& p : probes) p = keys[r.below(o.n)];
    }
};

// `passes` timed walks of container c in its order (r.walk_ns, the median per
// element), then the placement of its neighbours; returns the walk's checksum.
template <class C>
u64 time_walks(const C& c, const options& o, result& r) {
    std::vector<double> walks;
    u64 walk_sum = 0;
    for (int p = 0; p < std::max(1, o.passes); ++p) {
        const double t0 = now_s();
        u64 acc = 0;
        for (const auto& e : c) acc = acc * 0x100000001b3ULL + payload(e);
        walks.push_back(ns_per(t0, c.size()));
        walk_sum = acc;
    }
    r.walk_ns = median(walks);
    r.elements = c.size();
    adjacency_count adj;
    const void* prev = nullptr;
    for (const auto& e : c) {
        if (prev) adj.add(prev, &e);
        prev = &e;
    }
    adj.store(r);
    return walk_sum;
}

// --reorganize 1: the container's reorganize(), timed apart (r.reorganize_ns).
template <class C>
void reorganize_if_asked(C& c, const options& o, result& r) {
    if constexpr (requires { c.reorganize(); }) {
        if (o.reorganize) {
            const double t0 = now_s();
            c.reorganize();
            r.reorganize_ns = ns_per(t0, c.size());
        }
    }
}

// Timed walks and lookups over a built tree c.
template <class C>
void time_tree(const C& c, const tree_input& in, const options& o, result& r) {
    const u64 walk_sum = time_walks(c, o, r);
    const double t0 = now_s();
    u64 look_sum = 0;
    for (u64 k : in.probes) {
        auto it = c.find(k);
        if (it != c.end()) look_sum += payload(*it);
    }
    r.lookup_ns = ns_per(t0, in.probes.size());
    r.checksum = walk_sum ^ mix64(look_sum) ^ c.size();
}

// Builds c from in.keys in order with the unrelated allocations, then times it.
template <class C, class Junk>
result run_tree(C& c, Junk& junk, const tree_input& in, const options& o) {
    result r;
    const double t0 = now_s();
    for (u64 k : in.keys) {
        insert_key(c, k);
        junk.step();
    }
    r.build_ns = ns_per(t0, in.keys.size());
    reorganize_if_asked(c, o, r);
    time_tree(c, in, o, r);
    return r;
}

// The packed reference: the same unrelated allocations, the keys sorted and
// inserted in key order into a tree whose nodes come from a bump arena.
template <class Junk>
result run_tree_packed(Junk& junk, const tree_input& in, const options& o) {
    result r;
    std::vector<u64> sorted;
    sorted.reserve(in.keys.size());
    const double t0 = now_s();
    for (u64 k : in.keys) {
        sorted.push_back(k);
        junk.step();
    }
    std::sort(sorted.begin(), sorted.end());
    arena a(in.keys.size() * 64 + 4096);
    auto fill = [&](auto& c) {
        for (u64 k : sorted) {
            if constexpr (is_map<std::remove_reference_t<decltype(c)>>) c.emplace_hint(c.end(), k, value_of(k));
            else c.emplace_hint(c.end(), k);
        }
        r.build_ns = ns_per(t0, in.keys.size());
        time_tree(c, in, o, r);
    };
    if (o.workload == "map") {
        using A = bump_allocator<std::pair<const u64, u64>>;
        std::map<u64, u64, std::less<>, A> c{A(a)};
        fill(c);
    } else {
        using A = bump_allocator<u64>;
        std::set<u64, std::less<>, A> c{A(a)};
        fill(c);
    }
    return r;
}

// ---------------------------------------------------------------------------
// list
// ---------------------------------------------------------------------------
struct list_input {
    std::vector<u64> values;
    std::vector<std::uint32_t> after;   // value i goes right after value after[i] < i
    list_input(const options& o) : values(o.n), after(o.n) {
        rng r(o.seed * 5 + 9);
        for (std::size_t i = 0; i < o.n; ++i) {
            values[i] = mix64(i ^ (o.seed << 40));
            after[i] = i == 0 ? 0 : static_cast<std::uint32_t>(r.below(i));
        }
    }
};

// Builds l (std::list or hinted_list of u64) from in with the unrelated
// allocations; returns the time per insert.
template <class L, class Junk>
double build_list(L& l, Junk& junk, const list_input& in) {
    std::vector<typename L::iterator> at;
    at.reserve(in.values.size());
    const double t0 = now_s();
    for (std::size_t i = 0; i < in.values.size(); ++i) {
        at.push_back(l.insert(i == 0 ? l.end() : std::next(at[in.after[i]]), in.values[i]));
        junk.step();
    }
    return ns_per(t0, in.values.size());
}

// Builds l, then, if asked, reorganize(), then times it.
template <class L, class Junk>
result run_list(L& l, Junk& junk, const list_input& in, const options& o) {
    result r;
    r.build_ns = build_list(l, junk, in);
    reorganize_if_asked(l, o, r);
    r.checksum = time_walks(l, o, r) ^ l.size();
    return r;
}

// The packed reference: built like the others (through std::allocator, with
// the same unrelated allocations), then copied in list order into a list whose
// nodes come from a bump arena, the original freed, and walked.
template <class Junk>
result run_list_packed(Junk& junk, const list_input& in, const options& o) {
    result r;
    const double t0 = now_s();
    std::list<u64> built;
    build_list(built, junk, in);
    arena a(in.values.size() * 32 + 4096);
    using A = bump_allocator<u64>;
    std::list<u64, A> packed{A(a)};
    for (u64 v : built) packed.push_back(v);
    built.clear();
    r.build_ns = ns_per(t0, in.values.size());
    r.checksum = time_walks(packed, o, r) ^ packed.size();
    return r;
}

// ---------------------------------------------------------------------------
// graph
// ---------------------------------------------------------------------------
struct gnode;
struct gedge {
    gnode* to;
    gedge* next;
};
struct gnode {
    gedge* head;
    std::uint32_t mark;
    std::uint32_t dist;
};

struct graph_input {
    static constexpr int degree = 8;
    static constexpr std::int64_t window = 32;
    std::size_t n;
    std::vector<std::pair<std::uint32_t, std::uint32_t>> edges;   // in insertion order
    std::vector<std::uint32_t> roots;
    graph_input(const options& o) : n(o.n) {
        rng r(o.seed * 11 + 5);
        edges.reserve(n * degree);
        const auto sn = static_cast<std::int64_t>(n);
        for (std::size_t u = 0; u < n; ++u)
            for (int d = 0; d < degree; ++d) {
                std::int64_t v;
                if (r.below(8) == 0) v = static_cast<std::int64_t>(r.below(n));
                else v = ((static_cast<std::int64_t>(u) + static_cast<std::int64_t>(r.below(2 * window + 1)) - window) % sn + sn) % sn;
                edges.emplace_back(static_cast<std::uint32_t>(u), static_cast<std::uint32_t>(v));
            }
        for (std::size_t i = edges.size(); i > 1; --i) std::swap(edges[i - 1], edges[r.below(i)]);
        for (int i = 0; i < std::max(1, o.roots); ++i) roots.push_back(static_cast<std::uint32_t>(r.below(n)));
    }
};

// Breadth-first searches from every root over nodes (index = id); returns the
// checksum, fills bfs_ns and elements.
inline u64 time_bfs(std::vector<gnode*>& nodes, const graph_input& in, result& r) {
    std::vector<gnode*> queue(nodes.size());
    for (gnode* x : nodes) x->mark = 0;
    u64 sum = 0;
    std::vector<double> per_edge;
    std::uint32_t epoch = 0;
    for (std::uint32_t root : in.roots) {
        ++epoch;
        const double t0 = now_s();
        std::size_t head = 0, tail = 0, scanned = 0;
        u64 dsum = 0;
        gnode* s = nodes[root];
        s->mark = epoch;
        s->dist = 0;
        queue[tail++] = s;
        while (head < tail) {
            gnode* x = queue[head++];
            dsum += x->dist;
            for (gedge* e = x->head; e; e = e->next) {
                ++scanned;
                gnode* y = e->to;
                if (y->mark != epoch) {
                    y->mark = epoch;
                    y->dist = x->dist + 1;
                    queue[tail++] = y;
                }
            }
        }
        per_edge.push_back(ns_per(t0, scanned));
        sum = mix64(sum ^ dsum ^ (u64(tail) << 32) ^ scanned);
        r.elements = scanned;
    }
    r.bfs_ns = median(per_edge);
    return sum;
}

// Builds the graph through memory policy M (allocate(n, hint)) with the
// unrelated allocations; `hinted`: a new node near the node naming it, an
// edge cell near its source node's latest cell (the node itself for the first).
template <class M, class Junk>
std::vector<gnode*> build_graph(M& m, Junk& junk, const graph_input& in, bool hinted) {
    std::vector<gnode*> nodes(in.n, nullptr);
    auto make = [&](std::uint32_t id, const void* hint) {
        auto* x = static_cast<gnode*>(m.allocate(sizeof(gnode), hinted ? hint : nullptr));
        *x = gnode{nullptr, 0, 0};
        nodes[id] = x;
    };
    for (auto [u, v] : in.edges) {
        if (!nodes[u]) make(u, nodes[v]);
        if (!nodes[v]) make(v, nodes[u]);
        gnode* x = nodes[u];
        const void* hint = x->head ? static_cast<const void*>(x->head) : x;
        auto* e = static_cast<gedge*>(m.allocate(sizeof(gedge), hinted ? hint : nullptr));
        *e = gedge{nodes[v], x->head};
        x->head = e;
        junk.step();
    }
    return nodes;
}

template <class M>
void free_graph(M& m, std::vector<gnode*>& nodes) noexcept {
    for (gnode*& x : nodes) {
        for (gedge* e = x->head; e;) {
            gedge* n = e->next;
            m.deallocate(e, sizeof(gedge));
            e = n;
        }
        m.deallocate(x, sizeof(gnode));
        x = nullptr;
    }
}

// Placement of a built graph: consecutive cells of one node's list (the node
// and its first cell included).
inline void graph_adjacency(const std::vector<gnode*>& nodes, result& r) {
    adjacency_count adj;
    for (const gnode* x : nodes) {
        const void* prev = x;
        for (const gedge* e = x->head; e; e = e->next) {
            adj.add(prev, e);
            prev = e;
        }
    }
    adj.store(r);
}

template <class M, class Junk>
result run_graph(M& m, Junk& junk, const graph_input& in, bool hinted) {
    result r;
    const double t0 = now_s();
    auto nodes = build_graph(m, junk, in, hinted);
    r.build_ns = ns_per(t0, in.edges.size());
    r.checksum = time_bfs(nodes, in, r);
    graph_adjacency(nodes, r);
    free_graph(m, nodes);
    return r;
}

// The packed reference: built like the others (through m), then copied in
// breadth-first order from the first root into a bump arena (each node
// followed by its cells), the original freed, and searched.
template <class M, class Junk>
result run_graph_packed(M& m, Junk& junk, const graph_input& in) {
    result r;
    const double t0 = now_s();
    auto nodes = build_graph(m, junk, in, false);
    r.build_ns = ns_per(t0, in.edges.size());
    arena a(in.n * sizeof(gnode) + in.edges.size() * sizeof(gedge) + 4096);
    std::vector<gnode*> copy(in.n, nullptr);
    std::vector<std::uint32_t> order;
    order.reserve(in.n);
    {
        // Ids in BFS order from the first root, then the unreached ones.
        std::vector<char> seen(in.n, 0);
        // Map node pointer -> id through a sorted copy (no per-node id field).
        std::vector<std::pair<gnode*, std::uint32_t>> ptr_id(in.n);
        for (std::uint32_t i = 0; i < in.n; ++i) ptr_id[i] = {nodes[i], i};
        std::sort(ptr_id.begin(), ptr_id.end());
        auto id_of = [&](gnode* p) {
            return std::lower_bound(ptr_id.begin(), ptr_id.end(), std::pair<gnode*, std::uint32_t>{p, 0})->second;
        };
        auto visit = [&](std::uint32_t s) {
            if (seen[s]) return;
            seen[s] = 1;
            std::size_t h = order.size();
            order.push_back(s);
            while (h < order.size()) {
                for (gedge* e = nodes[order[h]]->head; e; e = e->next) {
                    const std::uint32_t v = id_of(e->to);
                    if (!seen[v]) {
                        seen[v] = 1;
                        order.push_back(v);
                    }
                }
                ++h;
            }
        };
        visit(in.roots.front());
        for (std::uint32_t i = 0; i < in.n; ++i) visit(i);
        // Each node followed by its cells; targets hold ids until every node has moved.
        for (std::uint32_t id : order) {
            auto* x = static_cast<gnode*>(a.allocate(sizeof(gnode)));
            *x = gnode{nullptr, 0, 0};
            copy[id] = x;
            gedge** tail = &x->head;
            for (gedge* e = nodes[id]->head; e; e = e->next) {
                auto* c = static_cast<gedge*>(a.allocate(sizeof(gedge)));
                *c = gedge{reinterpret_cast<gnode*>(static_cast<std::uintptr_t>(id_of(e->to))), nullptr};
                *tail = c;
                tail = &c->next;
            }
        }
        for (gnode* x : copy)
            for (gedge* e = x->head; e; e = e->next) e->to = copy[reinterpret_cast<std::uintptr_t>(e->to)];
    }
    free_graph(m, nodes);
    r.checksum = time_bfs(copy, in, r);
    graph_adjacency(copy, r);
    return r;
}


// ---------------------------------------------------------------------------
// scene: a tree (a scene graph, an AST) built node by node under random
// parents, aged by edits that replace whole subtrees, then walked depth first.
// ---------------------------------------------------------------------------
struct snode {
    snode* child;     // first child
    snode* sibling;   // next sibling
    u64 value;
    std::uint32_t slot;    // index in the live list (edits pick nodes at random)
    std::uint32_t depth;
};

// The tree and the list of its nodes an edit picks from. Every decision comes
// from the rng and the slots, never from an address, so every allocator builds
// the same tree.
template <class M>
class scene_tree {
public:
    static constexpr std::size_t max_subtree = 64;   // an edit replaces at most this many nodes

    scene_tree(M& m, bool hinted, u64 seed) : m_(m), hinted_(hinted), rng_(seed) {}
    scene_tree(const scene_tree&) = delete;
    scene_tree& operator=(const scene_tree&) = delete;
    ~scene_tree() {
        for (snode* x : live_) m_.deallocate(x, sizeof(snode));
    }

    // A new node, the first child of `parent` (hinted there if asked).
    snode* add(snode* parent) {
        auto* x = static_cast<snode*>(m_.allocate(sizeof(snode), hinted_ ? parent : nullptr));
        *x = snode{nullptr, nullptr, mix64(++made_), static_cast<std::uint32_t>(live_.size()),
                   parent ? parent->depth + 1 : 0};
        if (parent) {
            x->sibling = parent->child;
            parent->child = x;
        } else {
            root_ = x;
        }
        live_.push_back(x);
        return x;
    }
    snode* random_node() { return live_[rng_.below(live_.size())]; }
    snode* root() const noexcept { return root_; }   // the node added without a parent
    std::size_t size() const noexcept { return live_.size(); }

    // One edit: a random node's descendants (at most max_subtree of them, else
    // another node is drawn) are freed and as many new ones, plus 0-2, grown in
    // their place, each under x or one of the nodes grown before it.
    template <class Junk>
    void edit(Junk& junk) {
        for (;;) {
            snode* x = random_node();
            scratch_.clear();
            for (snode* c = x->child; c; c = c->sibling) scratch_.push_back(c);
            bool small = true;
            for (std::size_t i = 0; i < scratch_.size() && small; ++i) {
                for (snode* c = scratch_[i]->child; c; c = c->sibling) scratch_.push_back(c);
                small = scratch_.size() <= max_subtree;
            }
            if (!small) continue;
            for (snode* d : scratch_) remove(d);
            x->child = nullptr;
            const std::size_t grow = scratch_.size() + rng_.below(3);
            grown_.assign(1, x);
            for (std::size_t i = 0; i < grow; ++i) {
                grown_.push_back(add(grown_[rng_.below(grown_.size())]));
                junk.step();
            }
            return;
        }
    }

private:
    void remove(snode* d) noexcept {
        snode* last = live_.back();
        last->slot = d->slot;
        live_[d->slot] = last;
        live_.pop_back();
        m_.deallocate(d, sizeof(snode));
    }

    M& m_;
    bool hinted_;
    rng rng_;
    u64 made_ = 0;
    snode* root_ = nullptr;
    std::vector<snode*> live_, scratch_, grown_;
};

// visit(x) for every node under root (root included) in pre-order; the root
// has no sibling. `stack` is scratch, kept by the caller across walks.
template <class F>
void preorder(const snode* root, std::vector<const snode*>& stack, F&& visit) {
    stack.assign(1, root);
    while (!stack.empty()) {
        const snode* x = stack.back();
        stack.pop_back();
        visit(x);
        // The first child is visited next; its siblings after its subtree.
        if (x->sibling) stack.push_back(x->sibling);
        if (x->child) stack.push_back(x->child);
    }
}

// Depth-first (pre-order) walks from the root: `passes` timed ones (r.walk_ns
// per node), then the placement of consecutive nodes in that order.
inline u64 time_scene(const snode* root, std::size_t nodes, const options& o, result& r) {
    std::vector<const snode*> stack;
    stack.reserve(1024);
    std::vector<double> walks;
    u64 sum = 0;
    for (int p = 0; p < std::max(1, o.passes); ++p) {
        const double t0 = now_s();
        u64 acc = 0;
        preorder(root, stack, [&](const snode* x) { acc = acc * 0x100000001b3ULL + (x->value ^ x->depth); });
        walks.push_back(ns_per(t0, nodes));
        sum = acc;
    }
    r.walk_ns = median(walks);
    r.elements = nodes;
    adjacency_count adj;
    const void* prev = nullptr;
    preorder(root, stack, [&](const snode* x) {
        if (prev) adj.add(prev, x);
        prev = x;
    });
    adj.store(r);
    return sum ^ nodes;
}

// Builds the tree (N nodes, each under a random earlier one) and ages it by
// o.edits edits, each new node followed by its unrelated allocations.
// build_ns: per node and per edit, unrelated allocations included.
template <class M, class Junk>
void grow_scene(scene_tree<M>& t, Junk& junk, const options& o, result& r) {
    const double t0 = now_s();
    t.add(nullptr);
    for (std::size_t i = 1; i < o.n; ++i) {
        t.add(t.random_node());
        junk.step();
    }
    for (std::size_t e = 0; e < o.edits; ++e) t.edit(junk);
    r.build_ns = ns_per(t0, o.n + o.edits);
}

// The tree built and aged, then walked.
template <class M, class Junk>
result run_scene(M& m, Junk& junk, const options& o, bool hinted) {
    result r;
    scene_tree<M> t(m, hinted, o.seed * 17 + 11);
    grow_scene(t, junk, o, r);
    r.checksum = time_scene(t.root(), t.size(), o, r);
    return r;
}

// The packed reference: built and aged like the others, then copied in
// depth-first order into a bump arena (the copy keeps each node's depth and
// value, and its children in the same order), the original freed, and walked.
template <class M, class Junk>
result run_scene_packed(M& m, Junk& junk, const options& o) {
    result r;
    std::vector<snode> order;
    {
        scene_tree<M> t(m, false, o.seed * 17 + 11);
        grow_scene(t, junk, o, r);
        order.reserve(t.size());
        std::vector<const snode*> stack;
        preorder(t.root(), stack, [&](const snode* x) { order.push_back(*x); });
    }
    // In pre-order a node's first child is the next node and its next sibling
    // the first node after its subtree: rebuild the links from the depths.
    arena a(order.size() * sizeof(snode) + 4096);
    std::vector<snode*> copy(order.size());
    for (std::size_t i = 0; i < order.size(); ++i) {
        copy[i] = static_cast<snode*>(a.allocate(sizeof(snode)));
        *copy[i] = snode{nullptr, nullptr, order[i].value, 0, order[i].depth};
    }
    std::vector<snode*> last_at_depth;   // the latest node seen at each depth
    for (snode* x : copy) {
        const std::uint32_t d = x->depth;
        if (d > 0 && last_at_depth.size() >= d && !last_at_depth[d - 1]->child) last_at_depth[d - 1]->child = x;
        if (last_at_depth.size() > d && last_at_depth[d]) last_at_depth[d]->sibling = x;
        last_at_depth.resize(d + 1);
        last_at_depth[d] = x;
    }
    r.checksum = time_scene(copy.front(), copy.size(), o, r);
    return r;
}

} // namespace bench::order
