// Declaring your own allocator: a partition expression from the library's
// containers, attributes, hashes and predicates, handed to al::heap.
//
//   sizes (exact classes, 16-byte steps to 256, then four per power of two)
//     ∘ pages of each size in a red-black tree, searched for the page
//       NEAREST the hint
//     ∘ the chunks of that page
//
// Defero's shape (size first, then the page) with `nearest` instead of
// "the page used last": a request takes a chunk of its size from the free
// page closest to its hint, however far that is. The heap checks the
// composition when it is instantiated: a size level must be exact (the heap
// does not split), an address level must be allowed to leave the hint's class
// (with `match` there, it stops with a message naming the rule).
//
// The program builds a heap of it, frees one chunk on a few chosen pages,
// and checks that hinted requests are served from the nearest of those pages,
// then uses the same heap under std::set.
#include <allotheque/allotheque.hpp>

#include "../support/checks.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <vector>

namespace al = allotheque;

using nearest_page_partition = al::hash_table<al::size,                                 // attribute of the top level
                                              al::rb_tree<al::page, al::list<void>, al::nearest>,
                                              al::match_only,                           // the request's size class, nothing else
                                              al::spaced_classes<16, 256, 4>>;          // exact classes
// Reclaim never: fully free pages stay in the tree while the program looks.
using options = al::configured<al::heap_config{.reclaim = al::reclaim_policy::never}>;
using nearest_page_heap = al::heap<nearest_page_partition, al::arena_source, options>;

static_assert(al::partition<nearest_page_partition>);
static_assert(nearest_page_partition::size_exact, "the size level finds exact sizes: no splitting needed");
static_assert(nearest_page_partition::reads_address && nearest_page_heap::locality_aware,
              "the page level reads the hint, so al::allocator defaults to near_previous");

std::uintptr_t page_of(const void* p) { return reinterpret_cast<std::uintptr_t>(p) >> 12; }
std::uintptr_t distance(std::uintptr_t a, std::uintptr_t b) { return a > b ? a - b : b - a; }

int main() {
    examples::checks expect;
    nearest_page_heap heap;
    const al::request r{64};

    // 64 pages of 64-byte chunks, grouped by page.
    std::map<std::uintptr_t, std::vector<void*>> by_page;
    for (int i = 0; i < 64 * 64; ++i) {
        void* p = heap.allocate(r);
        by_page[page_of(p)].push_back(p);
    }
    std::vector<std::uintptr_t> pages;
    for (auto& [page, blocks] : by_page) pages.push_back(page);
    if (pages.size() != 64) {
        std::printf("FAIL: 4096 chunks of 64 bytes should fill 64 pages, not %zu\n", pages.size());
        return 1;
    }

    // One free chunk on each of a few pages: the only candidates for size 64.
    std::set<std::uintptr_t> free_pages;
    for (std::size_t i : {3u, 10u, 11u, 30u, 50u}) {
        heap.deallocate(by_page[pages[i]].back(), r);
        by_page[pages[i]].pop_back();
        free_pages.insert(pages[i]);
    }
    // Hints on other pages: each request must come from the nearest free page
    // (ties to the lower page), which then has nothing left for this size.
    std::size_t served_as_expected = 0;
    for (std::size_t h : {0u, 20u, 63u, 31u, 12u}) {
        const std::uintptr_t hint_page = pages[h];
        std::uintptr_t want = 0;
        for (std::uintptr_t f : free_pages)
            if (want == 0 || distance(f, hint_page) < distance(want, hint_page)) want = f;
        void* p = heap.allocate(al::request{64, by_page[hint_page].front()});
        served_as_expected += page_of(p) == want;
        free_pages.erase(want);
        by_page[page_of(p)].push_back(p);
    }
    expect(served_as_expected == 5, "each hinted request came from the nearest page with a free chunk");
    for (auto& [page, blocks] : by_page)
        for (void* p : blocks) heap.deallocate(p, r);

    // The same heap under a standard container: nodes near the previous one.
    {
        std::set<int, std::less<>, al::allocator<int, nearest_page_heap>> s{al::allocator<int, nearest_page_heap>(heap)};
        for (int i = 0; i < 10'000; ++i) s.insert((i * 7919) % 10'000);
        int expected = 0;
        bool ordered = true;
        for (int v : s) ordered = ordered && v == expected++;
        expect(ordered && s.size() == 10'000, "std::set on the heap holds 0..9999 in order");
    }
    expect(heap.stats().live_bytes == 0, "everything freed");

    std::printf("hash_table<size, rb_tree<page, list<void>, nearest>, match_only, spaced_classes<16, 256, 4>>: "
                "%zu of 5 hinted requests from the nearest free page; a 10000-node std::set on it\n",
                served_as_expected);
    return expect.status();
}
