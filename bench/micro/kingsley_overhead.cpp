// The zero-overhead check: the composed allotheque::kingsley_heap<> against a
// Kingsley allocator written plainly below (power-of-two free lists, a page
// refill cut into chunks of the class, lowest address on top), on the same
// sizes and patterns as alloc_patterns. run.py reports composed / plain.
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

class plain_kingsley {
    struct node {
        node* next;
    };
    static constexpr std::size_t page = 4096;
    static constexpr std::size_t arena = std::size_t{1} << 20;
    node* free_[48] = {};
    std::byte* wild_ = nullptr;
    std::byte* wild_end_ = nullptr;
    std::vector<void*> arenas_;

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
    std::vector<std::size_t> sizes_;

public:
    static constexpr bool is_heap = false;
    plain_kingsley() = default;
    plain_kingsley(const plain_kingsley&) = delete;
    plain_kingsley& operator=(const plain_kingsley&) = delete;
    ~plain_kingsley() {
        for (std::size_t i = 0; i < arenas_.size(); ++i) ::munmap(arenas_[i], sizes_[i]);
    }

    void* allocate(std::size_t n, const void*) {
        const std::size_t s = std::bit_ceil(n < 8 ? std::size_t{8} : n);
        const int k = std::countr_zero(s);
        if (node* p = free_[k]) {
            free_[k] = p->next;
            return p;
        }
        // Refill: one page (or one chunk when larger) cut into chunks of s bytes.
        const std::size_t span = s > page ? s : page;
        std::byte* p = take(span);
        for (std::size_t off = span - s; off >= s; off -= s) {
            auto* c = reinterpret_cast<node*>(p + off);
            c->next = free_[k];
            free_[k] = c;
        }
        return p;
    }
    void deallocate(void* q, std::size_t n) noexcept {
        const int k = std::countr_zero(std::bit_ceil(n < 8 ? std::size_t{8} : n));
        auto* c = static_cast<node*>(q);
        c->next = free_[k];
        free_[k] = c;
    }
    const char* name() const noexcept { return "plain_kingsley"; }
};

using namespace bench;
using namespace bench::micro;

template <class P, void (*Pattern)(benchmark::State&, P&)>
void run(benchmark::State& st) {
    P p;
    Pattern(st, p);
}

#define ALLOTHEQUE_PATTERNS(P, label)                                                       \
    BENCHMARK(run<P, lifo<P>>)->Name("lifo/" label)->Arg(16)->Arg(32)->Arg(64);              \
    BENCHMARK(run<P, random_free<P>>)->Name("random/" label)->Arg(16)->Arg(32)->Arg(64);     \
    BENCHMARK(run<P, churn<P>>)->Name("churn/" label)->Arg(16)->Arg(32)->Arg(64);

// The hand-written twin gives nothing back while it runs; so does this one.
using kingsley_keeping = raw::heap_policy<
    allotheque::kingsley_heap<allotheque::arena_source,
                              allotheque::configured<allotheque::heap_config{.reclaim = allotheque::reclaim_policy::never}>>>;

ALLOTHEQUE_PATTERNS(raw::kingsley_policy, "composed")
ALLOTHEQUE_PATTERNS(kingsley_keeping, "composed_never")
ALLOTHEQUE_PATTERNS(plain_kingsley, "plain")

} // namespace
