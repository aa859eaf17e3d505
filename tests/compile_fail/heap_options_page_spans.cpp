// expect: wrong number of template arguments|too many template arguments
// heap_options lost its fifth parameter, PageSpans, which had no effect since
// every span became whole pages of one chunk size (issue 34, item 9).
#include <allotheque/allotheque.hpp>

namespace al = allotheque;
using opts = al::heap_options<4096, 64 * 1024, 64 * 1024, 4 * 1024 * 1024, true>;
al::kingsley_heap<al::arena_source, opts> h;
