// A malloc of your own, declared: a partition, a heap over it, one macro.
//
// The partition here is the default malloc's (exact size classes hashed into
// a table, a list of free chunks per class), retuned for programs made of
// small objects: exact 16-byte classes up to 512 B instead of 128 B, and
// eight classes per power of two above that instead of four, so a 200-byte
// object takes 208 bytes rather than 224, and an 1100-byte one 1152 rather
// than 1280. Built by examples/CMakeLists.txt with
//
//   allotheque_add_malloc(example_custom_malloc SOURCES custom_malloc/fine_classes_malloc.cpp)
//
// into libexample_custom_malloc.so; then
//
//   LD_PRELOAD=$PWD/build/dev/examples/libexample_custom_malloc.so python3 -c 'print("hello")'
#include <allotheque/malloc.hpp>

#include <allotheque/attributes/size.hpp>
#include <allotheque/containers/hash_table.hpp>
#include <allotheque/containers/list.hpp>
#include <allotheque/hashes/spaced_classes.hpp>
#include <allotheque/heap.hpp>
#include <allotheque/predicates/match.hpp>

namespace at = allotheque;

using fine_classes = at::hash_table<at::size, at::list<void>, at::match_only, at::spaced_classes<16, 512, 8>>;

struct fine_classes_malloc {
    using heap = at::heap<fine_classes, at::arena_source, at::malloc_options>;
    static constexpr const char* name = "fine-classes";
};

ALLOTHEQUE_DEFINE_MALLOC(fine_classes_malloc);
