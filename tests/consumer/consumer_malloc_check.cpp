// Linked with consumer_malloc_objects: the declared malloc serves this program.
#include <allotheque/malloc_stats.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

int main() {
    void* p = std::malloc(100);
    if (!p) return 1;
    std::memset(p, 1, 100);
    std::free(p);
    allotheque_stats s;
    if (!allotheque_malloc_heap_name || std::strcmp(allotheque_malloc_heap_name(), "consumer-quickfit") != 0 ||
        allotheque_malloc_stats(&s) != 0 || s.heaps < 1) {
        std::fprintf(stderr, "consumer_malloc_check: the declared malloc does not serve this program\n");
        return 1;
    }
    std::printf("consumer_malloc_check: %s serves the program\n", allotheque_malloc_heap_name());
    return 0;
}
