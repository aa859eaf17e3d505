// layers::sized and layers::page_map: malloc-style interfaces (free without a
// size) over the exact-size heaps Velox and Medius; and heap_options' page_spans.
#include "catch.hpp"

#include <allotheque/allocators/medius.hpp>
#include <allotheque/allocators/velox.hpp>
#include <allotheque/layers/page_map.hpp>
#include <allotheque/layers/sized.hpp>
#include <allotheque/sources/counting_source.hpp>
#include <allotheque/sources/mmap_source.hpp>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace {

namespace at = allotheque;
using page_opts = at::heap_options<at::detail::page_size, 64 * 1024, 64 * 1024, 4 * 1024 * 1024, true>;
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

TEST_CASE("page_spans: every page of a heap holds one chunk size", "[heap][malloc]") {
    using H = at::velox_heap<src, page_opts>;
    struct record {
        std::vector<std::uintptr_t> first, bytes, chunk;
    } seen;
    H h;
    h.set_span_observer(
        [](void* c, std::byte* f, std::size_t n, std::size_t s) noexcept {
            auto& r = *static_cast<record*>(c);
            r.first.push_back(reinterpret_cast<std::uintptr_t>(f));
            r.bytes.push_back(n);
            r.chunk.push_back(s);
        },
        &seen);
    std::vector<std::pair<void*, std::size_t>> ps;
    for (std::size_t i = 0; i < 3000; ++i) {
        const std::size_t n = 8 + (i * 37) % 3000;
        ps.emplace_back(h.allocate(at::request{n}), n);
    }
    REQUIRE(!seen.first.empty());
    for (std::size_t i = 0; i < seen.first.size(); ++i) {
        CHECK(seen.first[i] % at::detail::page_size == 0);
        for (std::size_t j = 0; j < i; ++j)   // disjoint ranges
            CHECK((seen.first[i] + seen.bytes[i] <= seen.first[j] || seen.first[j] + seen.bytes[j] <= seen.first[i]));
    }
    // Each block lies in a range reported for its size.
    for (auto [p, n] : ps) {
        const auto x = reinterpret_cast<std::uintptr_t>(p);
        bool found = false;
        for (std::size_t i = 0; i < seen.first.size() && !found; ++i)
            found = x >= seen.first[i] && x < seen.first[i] + seen.bytes[i] && seen.chunk[i] == H::good_size(n);
        CHECK(found);
    }
    for (auto [p, n] : ps) h.deallocate(p, at::request{n});
}
