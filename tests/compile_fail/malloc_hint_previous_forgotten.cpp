// expect-first: needs a heap that remembers it
// A malloc that takes the previous allocation as its hint (the default) over
// a heap that does not record it would pass nullptr every time: refused,
// naming both ways out.
#include <allotheque/allocators/velox.hpp>
#include <allotheque/malloc.hpp>

inline constexpr allotheque::heap_config forgetful = [] {
    allotheque::heap_config c = allotheque::malloc_config;
    c.remember_last = false;
    return c;
}();
struct forgetful_malloc {
    using heap = allotheque::velox_heap<allotheque::arena_source, allotheque::configured<forgetful>>;
    static constexpr const char* name = "forgetful";
};
ALLOTHEQUE_DEFINE_MALLOC(forgetful_malloc);
