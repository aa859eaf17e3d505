// Writing a source: `buffer_source`, system memory from a region the caller
// owns (a static array here; shared memory, a huge-page mapping or a device
// window work the same), handed out in whole pages, first fit from the hint's
// page. A heap on it never touches the system: when the region is full it
// refuses, and the heap answers that as it answers a refusing kernel
// (try_allocate: nullptr, allocate: std::bad_alloc) and stays usable.
// See docs/extending.md, "Writing a source".
#include <allotheque/allotheque.hpp>

#include "../support/checks.hpp"

#include <bitset>
#include <cstdio>
#include <cstring>
#include <new>
#include <vector>

namespace al = allotheque;

constexpr std::size_t page = 4096;

// The region and which of its pages are handed out. Sources are copied into
// the heap (heap(S s)), so the state lives outside and the source points to it.
template <std::size_t Pages>
struct page_region {
    alignas(page) std::byte bytes[Pages * page];
    std::bitset<Pages> used;
    std::size_t refusals = 0;

    std::size_t pages_used() const noexcept { return used.count(); }
    bool contains(const void* p) const noexcept {
        return static_cast<const std::byte*>(p) >= bytes && static_cast<const std::byte*>(p) < bytes + sizeof bytes;
    }
};

template <std::size_t Pages>
struct buffer_source {
    page_region<Pages>* region;

    // n is a multiple of the page size; the answer must be page-aligned, or
    // nullptr. `near` is where the heap would like the memory: start there.
    void* allocate(std::size_t n, const void* near) noexcept {
        const std::size_t want = n / page;
        const std::size_t from = region->contains(near)
                                     ? static_cast<std::size_t>(static_cast<const std::byte*>(near) - region->bytes) / page
                                     : 0;
        for (std::size_t pass = 0; pass < 2; ++pass)
            for (std::size_t first = pass ? 0 : from, run = 0, i = first; i < Pages; ++i) {
                run = region->used[i] ? 0 : run + 1;
                if (run == want) {
                    for (std::size_t k = i + 1 - want; k <= i; ++k) region->used.set(k);
                    return region->bytes + (i + 1 - want) * page;
                }
            }
        ++region->refusals;
        return nullptr;
    }
    // Exactly a range allocate returned.
    void deallocate(void* p, std::size_t n) noexcept {
        const std::size_t first = static_cast<std::size_t>(static_cast<std::byte*>(p) - region->bytes) / page;
        for (std::size_t k = first; k < first + n / page; ++k) region->used.reset(k);
    }
    // Not declared, so the defaults apply: `zeroed` (false: reused pages keep
    // old bytes, so calloc-style requests are cleared by the heap), `decommit`
    // (none: the back end keeps free pages instead of returning them to the
    // system), `thread_safe` (false: each heap must own its source).
};
static_assert(al::source<buffer_source<16>> && !al::decommitting_source<buffer_source<16>>);

constexpr std::size_t region_pages = 1024;   // 4 MiB
static page_region<region_pages> region;      // static storage: no system call at all

using source = buffer_source<region_pages>;
using heap = al::heap<al::segregated_partition<>, source>;

int main() {
    examples::checks expect;
    std::size_t filled = 0;
    {
        heap h{source{&region}};

        // Fill the region with 48-byte blocks until the source refuses.
        std::vector<unsigned char*> blocks;
        const al::request r{48};
        while (void* p = h.try_allocate(r)) {
            auto* b = static_cast<unsigned char*>(p);
            std::memset(b, static_cast<int>(blocks.size() & 0xff), 48);
            blocks.push_back(b);
        }
        filled = blocks.size();
        expect(region.refusals > 0, "the source was asked past its end");
        expect(filled > 0, "some blocks fit");
        bool inside = true, intact = true;
        for (std::size_t i = 0; i < blocks.size(); ++i) {
            inside = inside && region.contains(blocks[i]) && region.contains(blocks[i] + 47);
            for (std::size_t k = 0; k < 48; ++k) intact = intact && blocks[i][k] == (i & 0xff);
        }
        expect(inside, "every block lies in the region");
        expect(intact, "no two blocks overlap");

        // Full: allocate throws, try_allocate says nullptr, the heap stays usable.
        bool threw = false;
        try {
            (void)h.allocate(r);
        } catch (const std::bad_alloc&) {
            threw = true;
        }
        expect(threw, "allocate throws std::bad_alloc when the source refuses");
        h.deallocate(blocks.back(), r);
        blocks.pop_back();
        void* again = h.try_allocate(r);
        expect(again != nullptr, "a freed block serves the next request");
        if (again) blocks.push_back(static_cast<unsigned char*>(again));

        // Free everything; a large block (its own span) now fits again.
        for (unsigned char* b : blocks) h.deallocate(b, r);
        h.trim();
        void* big = h.try_allocate(al::request{1 << 20});
        expect(big != nullptr && region.contains(big), "a 1 MiB block fits once the small ones are gone");
        if (big) h.deallocate(big, al::request{1 << 20});
    }
    // The heap is gone: every page it took is back in the region.
    expect(region.pages_used() == 0, "the destroyed heap gave every page back");

    std::printf("%zu blocks of 48 bytes from a %zu KiB region (%.0f%% of it payload); "
                "%zu refusals, answered cleanly; %zu pages in use after the heap\n",
                filled, sizeof region.bytes / 1024, 100.0 * static_cast<double>(filled * 48) / sizeof region.bytes,
                region.refusals, region.pages_used());
    return expect.status();
}
