// expect: alignof\(T\) exceeds what this heap can guarantee
// A type aligned beyond the heap's max_alignment (one page).
#include <allotheque/allotheque.hpp>

namespace al = allotheque;
struct alignas(8192) big_page {
    char bytes[8192];
};
al::kingsley_heap<> h;
al::allocator<big_page, al::kingsley_heap<>> a(h);
