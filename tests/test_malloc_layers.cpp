// layers::sized and layers::page_map: malloc-style interfaces (free without a
// size) over the exact-size heaps Velox and Medius; and the page map behind them.
#include "catch.hpp"

#include <allotheque/allocators/medius.hpp>
#include <allotheque/allocators/segregated.hpp>
#include <allotheque/backend/page_map.hpp>
#include <allotheque/allocators/velox.hpp>
#include <allotheque/layers/page_map.hpp>
#include <allotheque/layers/sized.hpp>
#include <allotheque/sources/counting_source.hpp>
#include <allotheque/sources/mmap_source.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace {

namespace at = allotheque;
using page_opts = at::heap_options<at::detail::page_size, 64 * 1024, 64 * 1024, 4 * 1024 * 1024>;
using src = at::counting_source<at::mmap_source>;

struct live {
    unsigned char* p;
    std::size_t n;
    unsigned char v;
};

template <class M>
void exercise(M& m) {
    std::mt19937_64 rng(7);
    std::vector<live> blocks;
    for (int round = 0; round < 20000; ++round) {
        if (!blocks.empty() && rng() % 3 == 0) {
            const std::size_t i = rng() % blocks.size();
            live b = blocks[i];
            bool intact = true;
            for (std::size_t k = 0; k < b.n; ++k) intact = intact && b.p[k] == b.v;
            REQUIRE(intact);
            m.deallocate(b.p);
            blocks[i] = blocks.back();
            blocks.pop_back();
            continue;
        }
        const std::size_t sizes[] = {0, 1, 8, 24, 100, 1000, 3000, 5000, 70000, 200000};
        const std::size_t n = rng() % 4 == 0 ? sizes[rng() % 10] : rng() % 600;
        const std::size_t a = rng() % 5 == 0 ? std::size_t{1} << (rng() % 18) : 0;   // up to 128 KiB
        auto* p = static_cast<unsigned char*>(m.allocate(n, a));
        REQUIRE(p != nullptr);
        REQUIRE(reinterpret_cast<std::uintptr_t>(p) % 16 == 0);
        if (a) REQUIRE(reinterpret_cast<std::uintptr_t>(p) % a == 0);
        REQUIRE(m.usable_size(p) >= n);
        const auto v = static_cast<unsigned char>(rng());
        std::memset(p, v, n);
        blocks.push_back({p, n, v});
    }
    for (live& b : blocks) m.deallocate(b.p);
}

} // namespace

TEMPLATE_TEST_CASE("malloc-style layers serve, align and free without a size", "[layers][malloc]",
                   (at::layers::sized<at::velox_heap<src>>), (at::layers::sized<at::medius_heap<src>>),
                   (at::layers::sized<at::velox_heap<src, page_opts>>),
                   (at::layers::page_map<at::velox_heap<src, page_opts>>),
                   (at::layers::page_map<at::medius_heap<src, page_opts>>)) {
    auto* m = new TestType();
    exercise(*m);
    m->deallocate(nullptr);
    CHECK(m->usable_size(nullptr) == 0);
    CHECK(m->allocate(1, 3) == nullptr);   // not a power of two
    delete m;
}

TEST_CASE("sized over a page-map heap: alignments up to 1 MiB served and freed, above refused", "[layers][malloc]") {
    // The header before p must lie within the first MiB of the heap's block,
    // all the page map records of a large block: with 2 MiB alignment p could
    // land past it, and freeing it aborted as a pointer the heap never gave out.
    at::layers::sized<at::segregated_heap<>> h;
    static_assert(decltype(h)::max_alignment == std::size_t{1} << 20);
    for (std::size_t a = 4096; a <= decltype(h)::max_alignment; a *= 2)
        for (int i = 0; i < 4; ++i) {
            void* p = h.allocate(100, a);
            REQUIRE(p);
            CHECK(reinterpret_cast<std::uintptr_t>(p) % a == 0);
            CHECK(h.usable_size(p) >= 100);
            std::memset(p, 3, 100);
            h.deallocate(p);
        }
    CHECK(h.allocate(100, std::size_t{2} << 20) == nullptr);
    CHECK(h.allocate(100, std::size_t{1} << 30) == nullptr);
}

TEST_CASE("page map: every page of a span holds one chunk size", "[heap][malloc]") {
    using H = at::velox_heap<src, page_opts>;
    H h;
    auto& map = at::backend::page_map::instance();
    std::vector<std::pair<void*, std::size_t>> ps;
    for (std::size_t i = 0; i < 3000; ++i) {
        const std::size_t n = 8 + (i * 37) % 3000;
        ps.emplace_back(h.allocate(at::request{n}), n);
    }
    std::vector<const at::backend::span*> spans;
    for (auto [p, n] : ps) {
        const at::backend::span* sp = map.find(p);
        REQUIRE(sp != nullptr);
        CHECK(sp->state == at::backend::span_state::small);
        CHECK(sp->chunk == H::good_size(n));   // one chunk size per span, found from any of its pages
        CHECK(sp->owner == &h);
        CHECK(reinterpret_cast<std::uintptr_t>(sp->base) % at::detail::page_size == 0);
        CHECK(sp->bytes % at::detail::page_size == 0);
        CHECK((static_cast<std::byte*>(p) - sp->base) % sp->chunk == 0);
        CHECK(h.usable_size(p) == H::good_size(n));
        for (std::size_t pg = 0; pg < sp->bytes; pg += at::detail::page_size) CHECK(map.find(sp->base + pg) == sp);
        spans.push_back(sp);
    }
    std::sort(spans.begin(), spans.end());
    spans.erase(std::unique(spans.begin(), spans.end()), spans.end());
    std::sort(spans.begin(), spans.end(), [](auto* a, auto* b) { return a->base < b->base; });
    for (std::size_t i = 1; i < spans.size(); ++i) CHECK(spans[i - 1]->end() <= spans[i]->base);   // disjoint
    for (auto [p, n] : ps) h.deallocate(p, at::request{n});
}
