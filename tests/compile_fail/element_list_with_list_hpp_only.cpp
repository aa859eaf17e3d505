// expect-success
// list<Attr, void, Pred> (the element list) is complete with list.hpp alone.
#include <allotheque/containers/list.hpp>
#include <allotheque/attributes/size.hpp>

namespace al = allotheque;

al::list<al::size, void, al::first_fit>::header_type h;
static_assert(al::list<al::size, void, al::best_fit>::min_chunk > 0);
