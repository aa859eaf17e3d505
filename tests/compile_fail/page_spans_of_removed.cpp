// expect: page_spans_of[^ ]* is not a member|no member named .page_spans_of.
// page_spans_of was always true and is gone with heap_options' PageSpans
// (issue 34, item 9): code that still asks must not compile silently.
#include <allotheque/allotheque.hpp>

namespace al = allotheque;
static_assert(al::page_spans_of<al::heap_options<>>);
