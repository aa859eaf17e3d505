// expect-first: an exact heap needs free marks
// A heap<> malloc cannot tell a double free from a live block without free
// marks: ALLOTHEQUE_DEFINE_MALLOC refuses it, naming the option.
#include <allotheque/allocators/segregated.hpp>
#include <allotheque/malloc.hpp>

struct unmarked_malloc {
    using heap = allotheque::segregated_heap<allotheque::arena_source,
                                             allotheque::configured<allotheque::heap_config{.granularity = 16}>>;
    static constexpr const char* name = "unmarked";
};
ALLOTHEQUE_DEFINE_MALLOC(unmarked_malloc);
