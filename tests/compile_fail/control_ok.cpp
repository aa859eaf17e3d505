// expect-success
// Control: the good compositions compile with the same command line, so the
// failures above are the static_asserts and not a broken include path.
#include <allotheque/allotheque.hpp>

namespace al = allotheque;
struct alignas(4096) one_page {
    char bytes[4096];
};
al::kingsley_heap<> k;
al::quickfit_heap<> q;
al::velox_heap<> v;
al::medius_heap<> m;
al::defero_heap<> d;
al::allocator<one_page, al::kingsley_heap<>> a(k);
al::heap<al::hash_table<al::vicinity<16>, al::list<al::size, al::list<void>, al::match>, al::match_first,
                        al::sparse_identity>>
    velox_match_first;
