// Writing a hash function: `fibonacci_classes`, chunk sizes that grow like the
// Fibonacci numbers (8, 16, 24, 40, 64, 104, 168, ..., each the sum of the two
// before, as in the Fibonacci buddy system): classes a factor of about 1.6
// apart, so fewer classes than quarter-power-of-two spacing and less waste
// than Kingsley's powers of two. It also shows `classify`, the optional member
// that finds a size's chunk size and class in one step.
// See docs/extending.md, "Writing a hash function".
#include <allotheque/allotheque.hpp>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace al = allotheque;

struct fibonacci_classes {
    // The chunk sizes, up to past the heap's large threshold (64 KiB).
    static constexpr auto sizes = [] {
        std::array<std::size_t, 20> s{8, 16};
        for (std::size_t i = 2; i < s.size(); ++i) s[i] = s[i - 1] + s[i - 2];
        return s;
    }();
    static_assert(sizes.back() > 64 * 1024);

    static constexpr bool exact = true;   // each class holds one chunk size

    // The first class whose size is >= n, and that size (one binary search).
    static constexpr al::size_class classify(std::size_t n) noexcept {
        const auto it = std::lower_bound(sizes.begin(), sizes.end(), n);
        if (it == sizes.end()) return {n, sizes.size()};   // beyond the table: the heap serves it directly
        return {*it, static_cast<std::size_t>(it - sizes.begin())};
    }
    static constexpr std::size_t round(std::size_t n) noexcept { return classify(n).size; }
    template <class Attr>
    static constexpr std::size_t index_of(typename Attr::value_type n) noexcept {
        return classify(n).index;
    }
    template <class Attr, class Header, class Init>
    using index = al::dense_index<sizes.size() + 1, Header, Init>;
};
static_assert(al::hash_function<fibonacci_classes, al::size> && al::size_segregation<fibonacci_classes>);

using fibonacci_heap = al::heap<al::hash_table<al::size, al::list<void>, al::match_only, fibonacci_classes>>;

int main() {
    int failures = 0;
    // The classes: consecutive, rounding idempotent, a chunk never more than
    // 1.625 times its request above 16 bytes (the ratio of consecutive sizes).
    std::size_t previous_class = 0;
    for (std::size_t n = 1; n <= 64 * 1024; ++n) {
        const std::size_t s = fibonacci_classes::round(n), c = fibonacci_classes::index_of<al::size>(n);
        const bool ok = s >= n && fibonacci_classes::round(s) == s && fibonacci_classes::index_of<al::size>(s) == c &&
                        (c == previous_class || c == previous_class + 1) && (n <= 16 || s * 1000 <= n * 1625);
        if (!ok) {
            std::printf("FAIL: size %zu -> chunk %zu, class %zu\n", n, s, c);
            ++failures;
        }
        previous_class = c;
    }
    std::printf("sizes 1..65536 fall in %zu classes:", previous_class + 1);
    for (std::size_t n : {1, 20, 41, 100, 1000, 5000}) std::printf(" %zu->%zu", n, fibonacci_heap::good_size(n));
    std::puts("");

    // Mean waste on random sizes, against Kingsley's powers of two.
    std::mt19937_64 rng(1);
    std::uniform_int_distribution<std::size_t> size(1, 4096);
    double waste_fibonacci = 0, waste_kingsley = 0;
    constexpr int samples = 100000;
    for (int i = 0; i < samples; ++i) {
        const std::size_t n = size(rng);
        const double f = double(fibonacci_heap::good_size(n)), k = double(al::kingsley_heap<>::good_size(n));
        waste_fibonacci += (f - double(n)) / f;
        waste_kingsley += (k - double(n)) / k;
    }
    std::printf("mean waste on sizes 1..4096: fibonacci %.1f%%, kingsley %.1f%%\n", 100 * waste_fibonacci / samples,
                100 * waste_kingsley / samples);
    failures += !(waste_fibonacci < waste_kingsley);

    // The heap in use: blocks of random sizes, filled, checked, freed, reused.
    fibonacci_heap heap;
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
