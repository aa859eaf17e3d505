// detail::glibc_heap: how the malloc tells blocks of glibc's own malloc (a
// DEEPBIND plugin's) from foreign pointers. The blocks themselves are tested
// by the adversarial cases glibc_main_heap and glibc_hugetlb_arenas; here,
// what GLIBC_TUNABLES says glibc's thread heaps are aligned to.
#include "catch.hpp"

#include <allotheque/malloc/glibc_heap.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

using gh = allotheque::detail::glibc_heap;
constexpr std::uintptr_t mib = std::uintptr_t{1} << 20;

// /proc/meminfo's Hugepagesize, read with stdio (0 when absent).
std::uintptr_t meminfo_huge_page() {
    std::FILE* f = std::fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    unsigned long kb = 0;
    while (std::fgets(line, sizeof line, f))
        if (std::sscanf(line, "Hugepagesize: %lu kB", &kb) == 1) break;
    std::fclose(f);
    return std::uintptr_t{kb} * 1024;
}

} // namespace

TEST_CASE("glibc_heap: the huge page glibc.malloc.hugetlb asks for", "[malloc]") {
    CHECK(gh::huge_page_asked(nullptr) == 0);
    CHECK(gh::huge_page_asked("") == 0);
    CHECK(gh::huge_page_asked("glibc.malloc.hugetlb=0") == 0);
    CHECK(gh::huge_page_asked("glibc.malloc.hugetlb=1") == 0);   // transparent huge pages: heaps as usual
    CHECK(gh::huge_page_asked("glibc.malloc.hugetlb=2") == meminfo_huge_page());
    CHECK(gh::huge_page_asked("glibc.malloc.hugetlb=2097152") == 2 * mib);
    CHECK(gh::huge_page_asked("glibc.malloc.hugetlb=0x40000000") == 1024 * mib);
    CHECK(gh::huge_page_asked("glibc.malloc.check=3:glibc.malloc.hugetlb=2097152:glibc.malloc.tcache_count=0") ==
          2 * mib);
    CHECK(gh::huge_page_asked("glibc.malloc.hugetlb=2097152:glibc.malloc.hugetlb=0") == 0);   // the last wins
    CHECK(gh::huge_page_asked("glibc.malloc.hugetlb=3") == 0);         // not a page size
    CHECK(gh::huge_page_asked("glibc.malloc.hugetlb=3145728") == 0);   // not a power of two
    CHECK(gh::huge_page_asked("xglibc.malloc.hugetlb=2097152") == 0);  // another name
    CHECK(gh::default_huge_page() == meminfo_huge_page());
}

TEST_CASE("glibc_heap: the library's own memory is no glibc arena's", "[malloc]") {
    // A stack address and a static one, tried at both alignments (glibc's
    // own blocks are the adversarial cases': this test may run under ASan,
    // whose malloc is not glibc's).
    static std::uint64_t global[64];
    std::uint64_t local[64] = {};
    for (const void* p : {static_cast<const void*>(global + 8), static_cast<const void*>(local + 8)}) {
        CHECK(!gh::in_other_arena(p, 64 * mib));
        CHECK(!gh::in_other_arena(p, 8 * mib));
    }
}

TEST_CASE("glibc_heap: main-heap chunks off the break are judged on their headers", "[malloc]") {
    // As if GLIBC_TUNABLES asked for huge pages (glibc's main heap is then
    // mappings of its own): chunks laid out as glibc lays them out, in a
    // buffer of this test's, a chunk at word 0 and its block two words on.
    const std::uintptr_t saved = gh::huge_heap_size();
    gh::huge_heap.store(8 * mib);
    alignas(16) std::uint64_t heap[64] = {};
    const auto chunk = [&](std::size_t word, std::uint64_t size) { heap[word + 1] = size; };
    const void* block = heap + 2;
    SECTION("an in-use chunk of 48 bytes, its neighbour's PREV_INUSE set") {
        chunk(0, 48 | 1);
        chunk(6, 32 | 1);
        CHECK(gh::in_main_mapping(block));
        CHECK(gh::owns(block));
        CHECK(gh::usable(block) == 40);
        SECTION("not without huge pages asked for") {
            gh::huge_heap.store(0);
            CHECK(!gh::in_main_mapping(block));
        }
    }
    SECTION("a neighbour that says this chunk is free") {
        chunk(0, 48 | 1);
        chunk(6, 32);
        CHECK(!gh::in_main_mapping(block));
    }
    SECTION("another arena's chunk, or a mapped one, is not the main heap's") {
        chunk(6, 32 | 1);
        chunk(0, 48 | 1 | 4);
        CHECK(!gh::in_main_mapping(block));
        chunk(0, 48 | 2);
        CHECK(!gh::in_main_mapping(block));
    }
    SECTION("sizes glibc never makes") {
        chunk(6, 32 | 1);
        for (std::uint64_t size : {std::uint64_t{0}, std::uint64_t{16}, std::uint64_t{40}, ~std::uint64_t{7}}) {
            chunk(0, size | 1);
            CHECK(!gh::in_main_mapping(block));
        }
        chunk(0, 48 | 1);
        chunk(6, 8 | 1);   // a neighbour too small to be a chunk
        CHECK(!gh::in_main_mapping(block));
    }
    SECTION("zeroed memory and a misaligned pointer") {
        CHECK(!gh::in_main_mapping(block));
        chunk(0, 48 | 1);
        chunk(6, 32 | 1);
        CHECK(!gh::in_main_mapping(static_cast<const char*>(block) + 8));
    }
    gh::huge_heap.store(saved);
}
