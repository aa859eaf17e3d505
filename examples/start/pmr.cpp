// std::pmr containers on an allotheque heap: `al::memory_resource<Heap>` is a
// std::pmr::memory_resource over any heap, so a pmr container (and every pmr
// container nested in it: the strings of a pmr::vector<pmr::string>) takes
// its memory from that heap, and a standard resource such as
// monotonic_buffer_resource can use the heap as its upstream.
//
// The heap here is the segregated heap (exact size classes) under the stats
// layer, which counts what passes through: the program checks that every
// byte the containers took came from the heap and went back, that two
// resources over two heaps keep their memory apart, and what happens to an
// alignment the heap cannot give (std::bad_alloc, as pmr requires).
#include <allotheque/allotheque.hpp>

#include "../support/checks.hpp"

#include <cstdint>
#include <cstdio>
#include <memory_resource>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

namespace al = allotheque;

using counted_heap = al::layers::stats<al::segregated_heap<>>;

int main() {
    examples::checks expect;

    counted_heap heap, other_heap;
    al::memory_resource<counted_heap> res(heap), other(other_heap);

    std::size_t peak_live = 0, allocations = 0;
    {
        // 1. Nested pmr containers: the vector, its strings and the map's
        //    nodes and buckets all come from `heap`.
        std::pmr::vector<std::pmr::string> words(&res);
        std::pmr::unordered_map<std::pmr::string, int> counts(&res);
        const char* text[] = {"partition", "attribute", "predicate", "container", "allocator", "partition"};
        for (int round = 0; round < 200; ++round)
            for (const char* w : text) {
                words.emplace_back(w).append(" (a word long enough to leave the small-string buffer)");
                ++counts[words.back()];
            }
        expect(words.get_allocator().resource() == &res && words.back().get_allocator().resource() == &res,
               "nested strings use the vector's resource");
        expect(counts[std::pmr::string(text[0], &res).append(" (a word long enough to leave the small-string buffer)")] == 400,
               "the map counted every occurrence");
        peak_live = heap.stats().live_bytes;
        allocations = heap.stats().allocations;
        expect(peak_live > words.size() * 50, "the strings' characters live in the heap");

        // 2. Another resource over another heap: a copy into it allocates
        //    there, and equality of resources is identity.
        std::pmr::vector<std::pmr::string> copy(words, &other);
        expect(copy == words, "the copy holds the same words");
        expect(other_heap.stats().live_bytes > 0 && heap.stats().live_bytes == peak_live,
               "the copy's memory comes from the other heap only");
        expect(res != other && res == res, "resources compare equal only to themselves");

        // 3. A standard resource on top: monotonic_buffer_resource takes its
        //    buffers from the heap and gives them back all at once.
        const std::size_t before = heap.stats().allocations;
        {
            std::pmr::monotonic_buffer_resource arena(&res);
            std::pmr::vector<std::uint64_t> scratch(&arena);
            for (std::uint64_t i = 0; i < 10'000; ++i) scratch.push_back(i * i);
            expect(scratch[9'999] == 9'999ull * 9'999ull, "scratch values intact");
        }
        expect(heap.stats().allocations > before, "the monotonic resource's buffers came from the heap");
        expect(heap.stats().live_bytes == peak_live, "and went back when it was destroyed");
    }
    expect(heap.stats().live_bytes == 0 && other_heap.stats().live_bytes == 0, "every byte is back in its heap");
    expect(heap.stats().allocations == heap.stats().deallocations, "every allocation was freed");

    // 4. Alignment: a power of two up to what the heap serves (a page inside
    //    spans, up to 1 GiB as a block of its own) is honoured; beyond it, and
    //    a non-power of two, throw std::bad_alloc. (Alignments up to 8 are the
    //    heap's natural one and are not examined.)
    void* aligned = res.allocate(100, 256);
    expect(reinterpret_cast<std::uintptr_t>(aligned) % 256 == 0, "256-byte alignment honoured");
    res.deallocate(aligned, 100, 256);
    auto refused = [&](std::size_t alignment) {
        try {
            void* p = res.allocate(64, alignment);
            res.deallocate(p, 64, alignment);
            return false;
        } catch (const std::bad_alloc&) {
            return true;
        }
    };
    expect(refused(24), "alignment 24 (not a power of two) throws std::bad_alloc");
    void* big_aligned = res.allocate(64, std::size_t{1} << 16);   // above a page: served as a large block
    expect(reinterpret_cast<std::uintptr_t>(big_aligned) % (std::size_t{1} << 16) == 0, "64 KiB alignment honoured");
    res.deallocate(big_aligned, 64, std::size_t{1} << 16);
    expect(refused(std::size_t{1} << 31), "alignment 2 GiB (above the heap's 1 GiB) throws std::bad_alloc");

    std::printf("%zu allocations through std::pmr, %zu bytes live at the peak, all returned; "
                "the other heap served the copy; bad alignment refused\n",
                allocations, peak_live);
    return expect.status();
}
