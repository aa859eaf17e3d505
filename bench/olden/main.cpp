// olden --program NAME --allocator NAME --scale quick|standard|full [--aged] [--repeat N]
//       [--age-objects N]
// olden --list            (one program name a line)
//
// Runs ONE (program, allocator) in this process and prints one JSON line; the
// fields are documented in bench/README.md. Allocators: glibc, jemalloc,
// mimalloc, tcmalloc (std::malloc; the last three need LD_PRELOAD of their
// library, which the driver verifies in /proc/self/maps), malloc (whatever
// malloc is active), allotheque-<heap> (std::malloc with LD_PRELOAD of an
// allotheque malloc library whose allotheque_malloc_heap_name() is <heap>),
// pmr, kingsley, quickfit, segregated, velox, medius, defero, lea,
// lea_deferred, kingsley_coalescing.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "olden/driver.hpp"

namespace {

int usage() {
    std::fputs("usage: olden --program NAME --allocator NAME --scale quick|standard|full [--aged] [--repeat N]"
               " [--age-objects N]\n       olden --list\n",
               stderr);
    return 2;
}

} // namespace

int main(int argc, char** argv) {
    using namespace bench::olden;
    options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "olden: %s needs a value\n", a.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--list") {
            for (const auto& n : program_names()) std::printf("%s\n", n.c_str());
            return 0;
        } else if (a == "--program") {
            o.program = value();
        } else if (a == "--allocator") {
            o.allocator = value();
        } else if (a == "--scale") {
            const std::string s = value();
            if (s == "quick") o.size = scale::quick;
            else if (s == "standard") o.size = scale::standard;
            else if (s == "full") o.size = scale::full;
            else return usage();
        } else if (a == "--aged") {
            o.aged = true;
        } else if (a == "--repeat") {
            o.repeat = std::atoi(value().c_str());
        } else if (a == "--age-objects") {
            o.age_objects = std::strtoull(value().c_str(), nullptr, 10);
        } else {
            return usage();
        }
    }
    if (o.program.empty() || o.allocator.empty()) return usage();
    const std::string& n = o.allocator;
    if (n == "glibc" || n == "jemalloc" || n == "mimalloc" || n == "tcmalloc" || n == "malloc" ||
        n.starts_with("allotheque-"))
        return drive_malloc(o);
    if (n == "pmr") return drive_pmr(o);
    if (n == "kingsley") return drive_kingsley(o);
    if (n == "quickfit") return drive_quickfit(o);
    if (n == "segregated") return drive_segregated(o);
    if (n == "velox") return drive_velox(o);
    if (n == "medius") return drive_medius(o);
    if (n == "defero") return drive_defero(o);
    if (n == "lea") return drive_lea(o);
    if (n == "lea_deferred") return drive_lea_deferred(o);
    if (n == "kingsley_coalescing") return drive_kingsley_coalescing(o);
    std::fprintf(stderr, "olden: unknown allocator '%s'\n", n.c_str());
    return 2;
}
