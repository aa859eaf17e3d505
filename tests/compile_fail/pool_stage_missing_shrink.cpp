// expect: allotheque::span_provider: needs `bool shrink\(span\*, std::size_t bytes\)`
// A pool stage without shrink: the registry names the missing member.
#include <allotheque/allocators/velox.hpp>
#include <allotheque/sources/mmap_source.hpp>

namespace al = allotheque;

template <al::source S>
struct no_shrink_pool {
    using source_type = S;
    no_shrink_pool() = default;
    explicit no_shrink_pool(S) {}
    al::backend::span* take(std::size_t, const void*) noexcept { return nullptr; }
    void give(al::backend::span*) noexcept {}
    bool extend(al::backend::span*, std::size_t) noexcept { return false; }
    std::size_t trim() noexcept { return 0; }
    void release_all() noexcept {}
    al::backend::pool_stats stats() const noexcept { return {}; }
    S& source() noexcept { return s; }
    S s;
};

struct options : al::configured<al::heap_config{}> {
    template <al::source S>
    using pool = no_shrink_pool<S>;
};

int main() {
    al::velox_heap<al::mmap_source, options> h;
    (void)h;
}
