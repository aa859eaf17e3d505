// expect-first: malloc's blocks are 16-byte aligned
// malloc promises max_align_t (16 bytes): a heap of 8-byte granularity is refused.
#include <allotheque/allocators/quickfit.hpp>
#include <allotheque/malloc.hpp>

struct coarse_malloc {
    using heap = allotheque::quickfit_heap<allotheque::arena_source,
                                           allotheque::configured<allotheque::heap_config{.free_marks = true}>>;
    static constexpr const char* name = "coarse";
};
ALLOTHEQUE_DEFINE_MALLOC(coarse_malloc);
