// The zero-overhead check: the composed allotheque::kingsley_heap<> and
// quickfit_heap<> against their twins written plainly below (a free list per
// class, a page refill cut into chunks of the class, lowest address on top),
// on the same sizes and patterns as alloc_patterns. run.py reports composed /
// plain per family, geometric mean over the patterns.
#include <benchmark/benchmark.h>
#include <sys/mman.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

#include "common/policies.hpp"
#include "micro/patterns.hpp"

namespace {

// Size classes of the hand-written twins, written as plainly as they come.
struct kingsley_classes {   // powers of two from 8
    static constexpr int count = 48;
    static int index(std::size_t n) noexcept { return std::countr_zero(std::bit_ceil(n < 8 ? std::size_t{8} : n)); }
    static std::size_t size(int k) noexcept { return std::size_t{1} << k; }
};
struct quickfit_classes {   // every 8 bytes to 128, then powers of two
    static constexpr int count = 64;
    static int index(std::size_t n) noexcept {
        if (n <= 128) return static_cast<int>((n < 8 ? 8 : n + 7) / 8);
        return 16 + static_cast<int>(std::bit_width(n - 1)) - 7;
    }
    static std::size_t size(int k) noexcept { return k <= 16 ? static_cast<std::size_t>(k) * 8 : std::size_t{1} << (k - 16 + 7); }
};

// A segregated free-list allocator written plainly: one list per class, a
// refill cuts one page (or one chunk when larger) into chunks of the class,
// lowest address on top; memory from 1 MiB mmap arenas.
template <class Classes>
class plain_heap {
    struct node {
        node* next;
    };
    static constexpr std::size_t page = 4096;
    static constexpr std::size_t arena = std::size_t{1} << 20;
    node* free_[Classes::count] = {};
    std::byte* wild_ = nullptr;
    std::byte* wild_end_ = nullptr;
    std::vector<void*> arenas_;
    std::vector<std::size_t> sizes_;

    std::byte* take(std::size_t bytes) {
        if (wild_ == nullptr || static_cast<std::size_t>(wild_end_ - wild_) < bytes) {
            const std::size_t m = bytes > arena ? bytes : arena;
            void* a = ::mmap(nullptr, m, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (a == MAP_FAILED) throw std::bad_alloc();
            arenas_.push_back(a);
            sizes_.push_back(m);
            wild_ = static_cast<std::byte*>(a);
            wild_end_ = wild_ + m;
        }
        std::byte* p = wild_;
        wild_ += bytes;
        return p;
    }

public:
    static constexpr bool is_heap = false;
    plain_heap() = default;
    plain_heap(const plain_heap&) = delete;
    plain_heap& operator=(const plain_heap&) = delete;
    ~plain_heap() {
        for (std::size_t i = 0; i < arenas_.size(); ++i) ::munmap(arenas_[i], sizes_[i]);
    }

    void* allocate(std::size_t n, const void*) {
        const int k = Classes::index(n);
        if (node* p = free_[k]) {
            free_[k] = p->next;
            return p;
        }
        return refill(k);
    }
    // Out of line, as any careful hand-written allocator has it: inlined, the
    // refill's registers would crowd the caller's loop around the pop above.
    [[gnu::noinline, gnu::cold]] void* refill(int k) {
        const std::size_t s = Classes::size(k);
        const std::size_t span = s > page ? s : page;
        std::byte* p = take(span);
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
    const char* name() const noexcept { return "plain"; }
};

using namespace bench;
using namespace bench::micro;

template <class P, void (*Pattern)(benchmark::State&, P&)>
void run(benchmark::State& st) {
    P p;
    // In a program an allocator's state is reachable from elsewhere (a global,
    // a pointer held by containers); the composed heap's is (the page map
    // records its spans). The twin's address escapes too, so that neither keeps
    // a free-list head in a register across the loop on the strength of an
    // escape analysis that no real allocator benefits from.
    benchmark::DoNotOptimize(&p);
    Pattern(st, p);
}

#define ALLOTHEQUE_PATTERNS(P, label)                                                       \
    BENCHMARK(run<P, lifo<P>>)->Name("lifo/" label)->Arg(16)->Arg(32)->Arg(64);              \
    BENCHMARK(run<P, random_free<P>>)->Name("random/" label)->Arg(16)->Arg(32)->Arg(64);     \
    BENCHMARK(run<P, churn<P>>)->Name("churn/" label)->Arg(16)->Arg(32)->Arg(64);

// "composed" is the ready-made heap as users get it; "never" the same with
// reclaim_policy::never: the twins give nothing back while they run either.
using never = allotheque::configured<allotheque::heap_config{.reclaim = allotheque::reclaim_policy::never}>;
using kingsley_never = raw::heap_policy<allotheque::kingsley_heap<allotheque::arena_source, never>>;
using quickfit_never = raw::heap_policy<allotheque::quickfit_heap<allotheque::arena_source, never>>;

ALLOTHEQUE_PATTERNS(raw::kingsley_policy, "kingsley.composed")
ALLOTHEQUE_PATTERNS(kingsley_never, "kingsley.never")
ALLOTHEQUE_PATTERNS(plain_heap<kingsley_classes>, "kingsley.plain")
ALLOTHEQUE_PATTERNS(raw::quickfit_policy, "quickfit.composed")
ALLOTHEQUE_PATTERNS(quickfit_never, "quickfit.never")
ALLOTHEQUE_PATTERNS(plain_heap<quickfit_classes>, "quickfit.plain")

} // namespace
