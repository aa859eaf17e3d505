// order --workload map|set|list|graph|scene --allocator NAME [--container std|hinted] [--hint H]
//       [--layout shared|isolated] [--n N] [--lookups M] [--passes P] [--roots R] [--junk K] [--seed S]
//       [--edits E]
//
// Runs ONE configuration in this process and prints one JSON line (see
// order.hpp for the workloads, bench/README.md for the fields). Allocators:
// glibc, jemalloc, mimalloc, tcmalloc (std containers with std::allocator; the
// last three need LD_PRELOAD of their library, which is verified in
// /proc/self/maps), malloc (whatever is active), packed (the traversal-order
// reference), velox, medius (allotheque heaps: std containers with
// allotheque::allocator, or --container hinted), room (layers::room over
// velox_heap, --fill 25|50|100 percent), quickfit, segregated (heaps that place
// by size alone, through the same containers; hints reach them and are
// ignored). --reorganize 1: the hinted tree's or list's reorganize() between
// the build and the timed walks (its time apart).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "order/driver.hpp"

namespace {

int usage() {
    std::fputs("usage: order --workload map|set|list|graph|scene --allocator NAME [--container std|hinted] [--hint H]\n"
               "             [--layout shared|isolated] [--n N] [--lookups M] [--passes P] [--roots R] [--junk K]"
               " [--seed S]\n             [--fill 25|50|100] [--reorganize 0|1] [--edits E]\n",
               stderr);
    return 2;
}

} // namespace

int main(int argc, char** argv) {
    using namespace bench::order;
    options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (i + 1 >= argc) return usage();
        const std::string v = argv[++i];
        auto count = [&](std::size_t& x) {
            char* end = nullptr;
            x = std::strtoull(v.c_str(), &end, 10);
            return end && *end == '\0' && !v.empty();
        };
        std::size_t x = 0;
        bool ok = true;
        if (a == "--workload") o.workload = v;
        else if (a == "--allocator") o.allocator = v;
        else if (a == "--container") o.container = v;
        else if (a == "--hint") o.hint = v;
        else if (a == "--layout") o.layout = v;
        else if (a == "--n") ok = count(o.n) && o.n >= 2 && o.n < (std::size_t(1) << 31);
        else if (a == "--lookups") ok = count(o.lookups);
        else if (a == "--passes") ok = count(x) && x >= 1 && x < 1000, o.passes = static_cast<int>(x);
        else if (a == "--roots") ok = count(x) && x >= 1 && x < 1000, o.roots = static_cast<int>(x);
        else if (a == "--junk") ok = count(x) && x < 100, o.junk = static_cast<int>(x);
        else if (a == "--seed") ok = count(x), o.seed = x;
        else if (a == "--fill") ok = count(x) && x >= 1 && x <= 100, o.fill = static_cast<unsigned>(x);
        else if (a == "--reorganize") ok = count(x) && x <= 1, o.reorganize = x == 1;
        else if (a == "--edits") ok = count(o.edits) && o.edits < (std::size_t(1) << 31);
        else return usage();
        if (!ok) {
            std::fprintf(stderr, "order: bad value '%s' for %s\n", v.c_str(), a.c_str());
            return 2;
        }
    }
    if (o.hint.empty()) o.hint = o.workload == "graph" ? "source" : o.workload == "list" ? "predecessor" : "parent";
    if (o.edits == ~std::size_t(0)) o.edits = o.n / 2;
    if (o.container != "hinted") o.hint = "-";   // only the hinted containers pass hints
    const std::string& n = o.allocator;
    if (n == "glibc" || n == "jemalloc" || n == "mimalloc" || n == "tcmalloc" || n == "malloc") return drive_malloc(o);
    if (n == "packed") return drive_packed(o);
    if (n == "velox") return drive_velox(o);
    if (n == "medius") return drive_medius(o);
    if (n == "room") return drive_room(o);
    if (n == "quickfit") return drive_quickfit(o);
    if (n == "segregated") return drive_segregated(o);
    if (n.empty()) return usage();
    return bad_option("allocator", n);
}
