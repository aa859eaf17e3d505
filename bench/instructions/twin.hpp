// The hand-written baseline the composed exact-class heaps claim to match: a
// segregated free-list allocator written plainly, one list per size class,
// a refill that cuts a page (or one chunk, when larger) into chunks of the
// class, lowest address on top, memory carved from a static arena. Its
// shape is that of bench/micro/kingsley_overhead.cpp's plain_heap (which takes
// mmap arenas; this one needs no system call at all); the classes are
// the library's: segregated_heap's spaced classes, QuickFit's and Kingsley's.
#pragma once
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

namespace bench::instructions {

// 16-byte steps to 128, then four sizes per power of two (spaced_classes<16, 128, 4>).
constexpr int segregated_class_of(std::size_t n) noexcept {
    if (n <= 128) return static_cast<int>((n + 15) / 16);
    const int g = static_cast<int>(std::bit_width(n - 1)) - 1;   // n in (2^g, 2^(g+1)]
    const std::size_t quarter = std::size_t{1} << (g - 2);
    const auto sub = static_cast<int>((n - (std::size_t{1} << g) + quarter - 1) / quarter);
    return 9 + (g - 7) * 4 + sub - 1;
}

struct segregated_classes {
    static constexpr int count = 9 + 4 * 57;
    // Small sizes by a table, as a careful hand-written malloc has it: one
    // load instead of a bit_width and a division.
    static constexpr auto small = [] {
        std::array<std::uint8_t, 1024 / 16 + 1> t{};
        for (std::size_t i = 0; i < t.size(); ++i) t[i] = static_cast<std::uint8_t>(segregated_class_of(i * 16));
        return t;
    }();
    static int index(std::size_t n) noexcept { return n <= 1024 ? small[(n + 15) / 16] : segregated_class_of(n); }
    static std::size_t size(int k) noexcept {
        if (k <= 8) return static_cast<std::size_t>(k) * 16;
        const int g = 7 + (k - 9) / 4;
        return (std::size_t{1} << g) + static_cast<std::size_t>((k - 9) % 4 + 1) * (std::size_t{1} << (g - 2));
    }
};

// Every 8 bytes to 128, then powers of two (multiple_then_pow2<8, 128>).
struct quickfit_classes {
    static constexpr int count = 17 + 64;
    static int index(std::size_t n) noexcept {
        if (n <= 128) return static_cast<int>((n + 7) / 8);
        return 17 + static_cast<int>(std::bit_width(n - 1)) - 8;
    }
    static std::size_t size(int k) noexcept {
        return k <= 16 ? static_cast<std::size_t>(k) * 8 : std::size_t{1} << (k - 17 + 8);
    }
};

// Powers of two from 8.
struct kingsley_classes {
    static constexpr int count = 64;
    static int index(std::size_t n) noexcept { return std::countr_zero(std::bit_ceil(n < 8 ? std::size_t{8} : n)); }
    static std::size_t size(int k) noexcept { return std::size_t{1} << k; }
};

template <class Classes>
class twin_heap {
    struct node {
        node* next;
    };
    static constexpr std::size_t page = 4096;
    node* free_[Classes::count] = {};
    std::byte* wild_;
    std::byte* end_;

public:
    static constexpr bool is_heap = false;
    twin_heap(std::byte* arena, std::size_t bytes) noexcept : wild_(arena), end_(arena + bytes) {}
    twin_heap(const twin_heap&) = delete;
    twin_heap& operator=(const twin_heap&) = delete;

    void* allocate(std::size_t n, const void*) noexcept {
        const int k = Classes::index(n);
        if (node* p = free_[k]) {
            free_[k] = p->next;
            return p;
        }
        return refill(k);
    }
    // Out of line, as a careful hand-written allocator has it: inlined, the
    // refill's registers would crowd the caller's loop around the pop above.
    [[gnu::noinline, gnu::cold]] void* refill(int k) noexcept {
        const std::size_t s = Classes::size(k);
        const std::size_t span = s > page ? s : page;
        if (static_cast<std::size_t>(end_ - wild_) < span) std::abort();   // the arena is sized for the patterns
        std::byte* p = wild_;
        wild_ += span;
        for (std::size_t off = span / s * s - s; off >= s; off -= s) {
            auto* c = reinterpret_cast<node*>(p + off);
            c->next = free_[k];
            free_[k] = c;
        }
        return p;
    }
    void deallocate(void* q, std::size_t n) noexcept {
        const int k = Classes::index(n);
        auto* c = static_cast<node*>(q);
        c->next = free_[k];
        free_[k] = c;
    }
    const char* name() const noexcept { return "twin"; }
};

} // namespace bench::instructions
