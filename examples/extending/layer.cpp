// Writing a layer: `quota<H>`, a memory budget for one subsystem. It counts
// the bytes its blocks take (the parent's good_size, so rounding counts) and
// refuses a request that would pass the budget, whatever the system has left.
// It overrides two members of layers::layer and inherits everything else:
// allocate() (throwing) is derived from its try_allocate, deallocate_run()
// becomes a loop over its deallocate, and what the parent offers beyond the
// heap concept (owns, last_allocation, stats, trim, owner_of…) is forwarded,
// so a velox heap under it keeps its near-previous hints.
// See docs/extending.md, "Writing a layer".
#include <allotheque/allotheque.hpp>

#include "../support/checks.hpp"

#include <cstdint>
#include <cstdio>
#include <list>
#include <new>
#include <utility>
#include <vector>

namespace al = allotheque;
namespace ly = allotheque::layers;

template <class H>
class quota : public ly::layer<quota<H>, H> {
    using base = ly::layer<quota<H>, H>;

public:
    explicit quota(std::size_t budget) noexcept : budget_(budget) {}

    template <al::request_like R = al::request>
    [[nodiscard]] void* try_allocate(const R& r) noexcept {
        const std::size_t n = this->parent_.good_size(r.size, r.alignment);
        if (n == 0 || n > budget_ - used_) {
            ++refused_;
            return nullptr;
        }
        void* p = this->parent_.try_allocate(r);
        if (p) used_ += n;
        return p;
    }
    // Declaring deallocate(p, r) hides the base's unsized deallocate(p), which
    // would bypass the count: a quota over a malloc-style heap stays sized.
    void deallocate(void* p, const al::request& r) noexcept {
        if (!p) return;
        used_ -= this->parent_.good_size(r.size, r.alignment);
        this->parent_.deallocate(p, r);
    }
    void deallocate_all() noexcept
        requires ly::has_deallocate_all<H>
    {
        used_ = 0;
        this->parent_.deallocate_all();
    }

    std::size_t used() const noexcept { return used_; }
    std::size_t refused() const noexcept { return refused_; }

private:
    std::size_t budget_, used_ = 0, refused_ = 0;
};
static_assert(ly::heap<quota<al::velox_heap<>>>);
static_assert(quota<al::velox_heap<>>::locality_aware, "forwarded: allocator<T, quota<velox>> hints near the previous node");
static_assert(ly::has_owns<quota<al::velox_heap<>>> && ly::has_trim<quota<al::velox_heap<>>>);
static_assert(!ly::has_unsized_deallocate<quota<al::velox_heap<>>>);

int main() {
    examples::checks expect;

    // 1. A std::vector under a 64 KiB budget: growth past it throws bad_alloc,
    //    the vector keeps its old buffer, and the budget is whole again after.
    using limited = quota<al::velox_heap<>>;
    limited q(64 * 1024);
    std::size_t reached = 0;
    {
        std::vector<int, al::allocator<int, limited>> v{al::allocator<int, limited>(q)};
        bool threw = false;
        try {
            for (int i = 0; i < 1'000'000; ++i) {
                v.push_back(i);
                reached = v.size();
            }
        } catch (const std::bad_alloc&) {
            threw = true;
        }
        expect(threw, "growth past the budget throws std::bad_alloc");
        expect(q.used() <= 64 * 1024, "never more than the budget in use");
        bool intact = true;
        for (std::size_t i = 0; i < v.size(); ++i) intact = intact && v[i] == static_cast<int>(i);
        expect(intact && v.size() == reached, "the vector keeps its elements after the refusal");
    }
    expect(q.used() == 0, "everything is given back with the vector");

    // 2. Hints pass through: list nodes under the quota land near each other.
    std::size_t same_page = 0, links = 0;
    {
        std::list<long, al::allocator<long, limited>> xs{al::allocator<long, limited>(q)};
        for (long i = 0; i < 500; ++i) xs.push_back(i);
        const long* prev = nullptr;
        for (const long& x : xs) {
            if (prev) {
                ++links;
                same_page += (reinterpret_cast<std::uintptr_t>(prev) >> 12) == (reinterpret_cast<std::uintptr_t>(&x) >> 12);
            }
            prev = &x;
        }
        expect(q.owns(prev), "owns() is forwarded from the heap");
    }
    expect(same_page * 10 >= links * 9, "at least 90% of consecutive list nodes share a page");

    // 3. Stacked: stats over the quota sees each refusal as a failed allocation,
    //    because stats calls try_allocate and the quota overrides it.
    ly::stats<quota<al::kingsley_heap<>>> s(std::in_place, std::size_t{4096});
    std::vector<void*> got;
    const al::request r{100};   // 128-byte chunks: 32 fit in 4096 bytes
    while (void* p = s.try_allocate(r)) got.push_back(p);
    expect(got.size() == 32, "32 chunks of 128 bytes fit in a 4096-byte budget");
    expect(s.stats().failed_allocations == 1 && s.parent().refused() == 1, "the refusal is counted by both layers");
    s.deallocate_run(got.data(), got.size(), r);   // the base's loop over quota::deallocate
    expect(s.parent().used() == 0, "deallocate_run went through the quota");

    std::printf("vector of int stopped at %zu elements under 64 KiB; %zu of %zu list links within one page; "
                "stats<quota<kingsley>>: %zu allocations, %zu refused\n",
                reached, same_page, links, s.stats().allocations, s.stats().failed_allocations);
    return expect.status();
}
