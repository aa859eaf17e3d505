// Writing a hash function: `quarter_pow2`, size classes a quarter of a power
// of two apart (40, 48, 56, 64, 80, 96, ...), so a block wastes less than a
// quarter of its size, against up to half with Kingsley's powers of two.
// See docs/extending.md, "Writing a hash function".
#include <allotheque/allotheque.hpp>

#include <bit>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace al = allotheque;

struct quarter_pow2 {
    static constexpr bool exact = true;   // each class holds one chunk size

    // The chunk size that serves n bytes: a multiple of 8 up to 32, then the
    // next multiple of 2^(k-2) for 2^k < n <= 2^(k+1).
    static constexpr std::size_t round(std::size_t n) noexcept {
        if (n <= 32) return n <= 8 ? 8 : (n + 7) / 8 * 8;
        const unsigned k = static_cast<unsigned>(std::bit_width(n - 1)) - 1;
        const std::size_t step = std::size_t{1} << (k - 2);
        return (n + step - 1) / step * step;
    }
    // Classes 0-3: 8..32; then four per power of two.
    template <class Attr>
    static constexpr std::size_t index_of(typename Attr::value_type n) noexcept {
        const std::size_t s = round(n);
        if (s <= 32) return s / 8 - 1;
        const unsigned k = static_cast<unsigned>(std::bit_width(s - 1)) - 1;
        return 4 + (k - 5) * 4 + (s >> (k - 2)) - 5;
    }
    // 64 classes cover sizes up to 2^17 (the heap serves larger ones directly).
    template <class Attr, class Header, class Init>
    using index = al::dense_index<64, Header, Init>;
};
static_assert(al::hash_function<quarter_pow2, al::size> && al::size_segregation<quarter_pow2>);
static_assert(quarter_pow2::index_of<al::size>(64 * 1024) < 64);

using quarter_heap = al::heap<al::hash_table<al::size, al::list<void>, al::match_only, quarter_pow2>>;

int main() {
    int failures = 0;
    // The classes: consecutive indices, rounding idempotent, waste < 25% above 32 bytes.
    std::size_t previous_class = 0;
    for (std::size_t n = 1; n <= 64 * 1024; ++n) {
        const std::size_t s = quarter_pow2::round(n), c = quarter_pow2::index_of<al::size>(n);
        const bool ok = s >= n && quarter_pow2::round(s) == s && quarter_pow2::index_of<al::size>(s) == c &&
                        (c == previous_class || c == previous_class + 1) && (n <= 32 || (s - n) * 4 < n);
        if (!ok) {
            std::printf("FAIL: size %zu -> chunk %zu, class %zu\n", n, s, c);
            ++failures;
        }
        previous_class = c;
    }
    std::printf("sizes 1..65536 fall in %zu classes:", previous_class + 1);
    for (std::size_t n : {1, 24, 33, 65, 100, 1000, 5000}) std::printf(" %zu->%zu", n, quarter_heap::good_size(n));
    std::puts("");

    // Average waste on random sizes, against Kingsley's powers of two.
    std::mt19937_64 rng(1);
    std::uniform_int_distribution<std::size_t> size(1, 4096);
    double waste_quarter = 0, waste_kingsley = 0;
    constexpr int samples = 100000;
    for (int i = 0; i < samples; ++i) {
        const std::size_t n = size(rng);
        waste_quarter += double(quarter_heap::good_size(n) - n) / double(quarter_heap::good_size(n));
        waste_kingsley += double(al::kingsley_heap<>::good_size(n) - n) / double(al::kingsley_heap<>::good_size(n));
    }
    std::printf("mean waste on sizes 1..4096: quarter_pow2 %.1f%%, kingsley %.1f%%\n", 100 * waste_quarter / samples,
                100 * waste_kingsley / samples);
    failures += !(waste_quarter < waste_kingsley);

    // The heap in use: blocks of random sizes, filled, checked, freed, reused.
    quarter_heap heap;
    struct block {
        unsigned char* p;
        std::size_t n;
        unsigned char tag;
    };
    std::vector<block> live;
    std::uniform_int_distribution<std::size_t> small(1, 1024);
    for (int round = 0; round < 3; ++round) {
        for (int i = 0; i < 10000; ++i) {
            const std::size_t n = small(rng);
            auto* p = static_cast<unsigned char*>(heap.allocate(al::request{n}));
            const auto tag = static_cast<unsigned char>(i);
            std::memset(p, tag, n);
            live.push_back({p, n, tag});
        }
        for (std::size_t i = 0; i < live.size();) {
            const block& b = live[i];
            for (std::size_t k = 0; k < b.n; ++k)
                if (b.p[k] != b.tag) {
                    std::puts("FAIL: a block was overwritten");
                    return 1;
                }
            if (rng() % 2) {
                heap.deallocate(b.p, al::request{b.n});
                live[i] = live.back();
                live.pop_back();
            } else {
                ++i;
            }
        }
    }
    for (const block& b : live) heap.deallocate(b.p, al::request{b.n});
    std::puts(failures == 0 ? "ok: classes as designed, less waste than powers of two, blocks intact" : "FAIL");
    return failures == 0 ? 0 : 1;
}
