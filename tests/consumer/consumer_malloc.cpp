// A malloc declared by a downstream project from the installed package.
#include <allotheque/allocators/quickfit.hpp>
#include <allotheque/malloc.hpp>

struct consumer_malloc {
    using heap = allotheque::quickfit_heap<allotheque::arena_source, allotheque::malloc_options, 16, 128>;
    static constexpr const char* name = "consumer-quickfit";
};
ALLOTHEQUE_DEFINE_MALLOC(consumer_malloc);
