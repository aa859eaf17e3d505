// Writing a predicate: `sticky` keeps serving from the class it served last for
// as long as that class can, whatever the hint says; then the hint's class;
// then the first one. Objects allocated in a burst end up together even when
// their hints point all over the heap. The library's own `al::nearest`
// (predicates/nearest.hpp) is the longer worked example in docs/extending.md;
// here it runs next to `sticky` on the same heap shape.
#include <allotheque/allotheque.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <vector>

namespace al = allotheque;

struct sticky {
    static constexpr bool exact = false;            // may serve another class than the hint's...
    static constexpr bool can_leave_target = true;  // ...so a heap accepts it on an address level
    static constexpr bool remembers = true;         // the container keeps c.last() for us

    template <al::class_cursor C, class Attempt>
    static std::byte* search(C& c, typename C::value_type target, Attempt&& attempt) {
        const auto last = c.last();
        if (last != c.none())
            if (std::byte* p = attempt(last)) return p;
        const auto looked = c.lookup(target);
        if (looked != c.none() && looked != last)
            if (std::byte* p = attempt(looked)) return p;
        for (auto h = c.first(); h != c.none(); h = c.next(h))
            if (h != last && h != looked)
                if (std::byte* p = attempt(h)) return p;
        return nullptr;
    }
};
static_assert(al::allocation_predicate<sticky>);

// Pages (vicinity<12>) ∘ exact sizes ∘ chunks, searched by Pred.
template <class Pred>
using paged_heap = al::heap<al::hash_table<al::vicinity<12>, al::list<al::size, al::list<void>, al::match>, Pred,
                                           al::sparse_identity>,
                            al::mmap_source>;

std::uintptr_t page_of(const void* p) { return reinterpret_cast<std::uintptr_t>(p) >> 12; }

// An aged heap: 4096 blocks of 64 bytes, every other one freed. Then 1024
// allocations, each hinted at a random live block. Checks Pred's rule on each
// and returns how often consecutive allocations changed page.
template <class Pred, class Rule>
int run(const char* name, Rule rule) {
    paged_heap<Pred> heap;
    constexpr std::size_t n = 64;
    std::vector<void*> blocks, live;
    for (int i = 0; i < 4096; ++i) blocks.push_back(heap.allocate(al::request{n}));
    std::map<std::uintptr_t, std::set<void*>> freed;   // page -> blocks we freed there
    for (std::size_t i = 0; i < blocks.size(); ++i) {
        if (i % 2) {
            live.push_back(blocks[i]);
            continue;
        }
        heap.deallocate(blocks[i], al::request{n});
        freed[page_of(blocks[i])].insert(blocks[i]);
    }
    std::mt19937_64 rng(7);
    int changes = 0, broken = 0;
    const void* previous = nullptr;
    std::vector<void*> fresh;
    for (int i = 0; i < 1024; ++i) {
        const void* hint = live[rng() % live.size()];
        void* p = heap.allocate(al::request{n, hint, 0});
        if (!rule(freed, previous, hint, p)) ++broken;
        if (auto it = freed.find(page_of(p)); it != freed.end()) {
            it->second.erase(p);
            if (it->second.empty()) freed.erase(it);
        }
        if (previous && page_of(previous) != page_of(p)) ++changes;
        previous = p;
        fresh.push_back(p);
    }
    std::printf("%-16s 1024 hinted allocations, %4d page changes, %d broken rules\n", name, changes, broken);
    for (void* p : fresh) heap.deallocate(p, al::request{n});
    for (void* p : live) heap.deallocate(p, al::request{n});
    return broken;
}

using freed_map = std::map<std::uintptr_t, std::set<void*>>;
auto distance(std::uintptr_t a, std::uintptr_t b) { return a > b ? a - b : b - a; }

int main() {
    int broken = 0;
    // sticky: the page only changes when the previous page has nothing of ours left.
    broken += run<sticky>("sticky", [](const freed_map& freed, const void* previous, const void*, const void* p) {
        return !previous || page_of(previous) == page_of(p) || !freed.count(page_of(previous));
    });
    // nearest: the hint's page if it has a free block, else no page of ours is nearer.
    broken += run<al::nearest>("nearest", [](const freed_map& freed, const void*, const void* hint, const void* p) {
        const auto want = page_of(hint);
        for (const auto& [page, blocks] : freed)
            if (distance(page, want) < distance(page_of(p), want)) return false;
        return true;
    });
    // match_last_first for comparison: the hint's page whenever it has a free block.
    broken += run<al::match_last_first>("match_last_first",
                                        [](const freed_map& freed, const void*, const void* hint, const void* p) {
                                            return !freed.count(page_of(hint)) || page_of(p) == page_of(hint);
                                        });
    std::puts(broken == 0 ? "ok: every allocation followed its predicate's rule" : "FAIL");
    return broken == 0 ? 0 : 1;
}
