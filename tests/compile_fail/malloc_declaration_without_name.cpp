// expect-first: the declaration needs `using heap = \.\.\.;` and `static constexpr const char\* name
// A declaration is a heap and a name: one without a name is refused first.
#include <allotheque/allocators/segregated.hpp>
#include <allotheque/malloc.hpp>

struct nameless_malloc {
    using heap = allotheque::segregated_heap<allotheque::arena_source, allotheque::malloc_options>;
};
ALLOTHEQUE_DEFINE_MALLOC(nameless_malloc);
