// expect: no level of this partition finds chunks of exactly the requested size
// A size list searched first-fit returns larger chunks: it needs splitting,
// which a heap does not do.
#include <allotheque/allotheque.hpp>

namespace al = allotheque;
al::heap<al::list<al::size, al::list<void>, al::first_fit>> h;
