// Tree locality on an aged heap: what a "child near parent" hint is worth.
//
// For each allocator: age the heap (many random 16..128-byte objects, a random
// half of them freed, the other half kept alive), then build a complete binary
// tree depth-first, each child allocated with its parent as the hint, and
// report
//   * the fraction of parent->child links whose two nodes share a 4 KiB page,
//   * the time of a depth-first traversal, per node (best of several runs).
// On a fresh heap every allocator packs such a tree well; ageing scatters the
// free chunks, and only an allocator that uses the hint (or, failing that, the
// class it used last) keeps children next to parents.
//
// Usage: tree_locality [--age N] [--depth D] [--check]
//   --age N    objects allocated while ageing (default 500000)
//   --depth D  tree depth; the tree has 2^D - 1 nodes (default 20: ~1M nodes)
//   --check    exit 1 unless Velox and Medius with hints beat aged Kingsley
//              (a sanity check only; the figures are what this program is for)
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <allotheque/allocators/defero.hpp>
#include <allotheque/allocators/kingsley.hpp>
#include <allotheque/allocators/medius.hpp>
#include <allotheque/allocators/quickfit.hpp>
#include <allotheque/allocators/velox.hpp>

namespace al = allotheque;

namespace {

struct node {
    node* left;
    node* right;
    std::uint64_t value;
};

// The two operations the experiment needs, for an allotheque heap or for the
// system allocator (which ignores hints).
template <class Heap>
struct heap_backend {
    Heap heap;
    bool use_hints = true;
    void* allocate(std::size_t n, const void* hint) {
        return heap.allocate(al::request{n, use_hints ? hint : nullptr, 0});
    }
    void deallocate(void* p, std::size_t n) { heap.deallocate(p, al::request{n, nullptr, 0}); }
};
struct malloc_backend {
    void* allocate(std::size_t n, const void*) {
        void* p = std::malloc(n);
        if (!p) throw std::bad_alloc();
        return p;
    }
    void deallocate(void* p, std::size_t) { std::free(p); }
};

struct result {
    double same_page = 0;
    double ns_per_node = 0;
};

template <class Backend>
node* build(Backend& b, unsigned depth, const node* parent, std::uint64_t& counter) {
    if (depth == 0) return nullptr;
    auto* n = static_cast<node*>(b.allocate(sizeof(node), parent));
    n->value = counter++;
    n->left = build(b, depth - 1, n, counter);
    n->right = build(b, depth - 1, n, counter);
    return n;
}

std::uint64_t sum(const node* n) { return n ? n->value + sum(n->left) + sum(n->right) : 0; }

void links(const node* n, std::size_t& same, std::size_t& total) {
    for (const node* c : {n->left, n->right})
        if (c) {
            ++total;
            same += reinterpret_cast<std::uintptr_t>(c) >> 12 == reinterpret_cast<std::uintptr_t>(n) >> 12;
            links(c, same, total);
        }
}

template <class Backend>
void destroy(Backend& b, node* n) {
    if (!n) return;
    destroy(b, n->left);
    destroy(b, n->right);
    b.deallocate(n, sizeof(node));
}

template <class Backend>
result run(Backend& b, std::size_t age, unsigned depth) {
    std::mt19937_64 rng(12345);
    std::vector<std::pair<void*, std::size_t>> objects(age);
    for (auto& [p, n] : objects) {
        n = 16 + rng() % 113;
        p = b.allocate(n, nullptr);
        std::memset(p, 0, n);
    }
    std::shuffle(objects.begin(), objects.end(), rng);
    for (std::size_t i = 0; i < objects.size() / 2; ++i) b.deallocate(objects[i].first, objects[i].second);

    std::uint64_t counter = 0;
    node* root = build(b, depth, nullptr, counter);
    result r;
    std::size_t same = 0, total = 0;
    links(root, same, total);
    r.same_page = total ? static_cast<double>(same) / static_cast<double>(total) : 0;

    double best = 1e30;
    volatile std::uint64_t sink = 0;
    for (int rep = 0; rep < 5; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        sink = sink + sum(root);
        const auto t1 = std::chrono::steady_clock::now();
        best = std::min(best, std::chrono::duration<double, std::nano>(t1 - t0).count());
    }
    r.ns_per_node = best / static_cast<double>(counter);

    destroy(b, root);
    for (std::size_t i = objects.size() / 2; i < objects.size(); ++i)
        b.deallocate(objects[i].first, objects[i].second);
    return r;
}

template <class Backend>
result measure(const char* name, std::size_t age, unsigned depth, bool hints = true) {
    auto b = std::make_unique<Backend>();
    if constexpr (requires { b->use_hints; }) b->use_hints = hints;
    const result r = run(*b, age, depth);
    std::printf("%-26s %10.3f %14.2f\n", name, r.same_page, r.ns_per_node);
    std::fflush(stdout);
    return r;
}

} // namespace

int main(int argc, char** argv) {
    std::size_t age = 500'000;
    unsigned depth = 20;
    bool check = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--age" && i + 1 < argc) age = std::strtoull(argv[++i], nullptr, 10);
        else if (a == "--depth" && i + 1 < argc) depth = static_cast<unsigned>(std::strtoul(argv[++i], nullptr, 10));
        else if (a == "--check") check = true;
        else {
            std::fprintf(stderr, "usage: %s [--age N] [--depth D] [--check]\n", argv[0]);
            return 2;
        }
    }
    if (depth < 2 || depth > 26) {
        std::fprintf(stderr, "depth must be in [2, 26]\n");
        return 2;
    }
    std::printf("aged with %zu objects of 16..128 B (half freed); tree of %llu nodes, depth-first, child hinted "
                "near parent\n\n",
                age, (1ull << depth) - 1);
    std::printf("%-26s %10s %14s\n", "allocator", "same page", "ns/node walk");
    measure<malloc_backend>("malloc (baseline)", age, depth);
    const result kingsley = measure<heap_backend<al::kingsley_heap<>>>("Kingsley", age, depth);
    measure<heap_backend<al::quickfit_heap<>>>("QuickFit", age, depth);
    const result velox = measure<heap_backend<al::velox_heap<>>>("Velox", age, depth);
    measure<heap_backend<al::velox_heap<>>>("Velox (no hints)", age, depth, false);
    const result medius = measure<heap_backend<al::medius_heap<>>>("Medius", age, depth);
    measure<heap_backend<al::medius_heap<>>>("Medius (no hints)", age, depth, false);
    measure<heap_backend<al::defero_heap<>>>("Defero", age, depth);
    measure<heap_backend<al::defero_heap<>>>("Defero (no hints)", age, depth, false);

    if (check && !(velox.same_page > kingsley.same_page && medius.same_page > kingsley.same_page)) {
        std::fprintf(stderr, "sanity check failed: the locality heaps should keep more links in one page than "
                             "aged Kingsley\n");
        return 1;
    }
    return 0;
}
