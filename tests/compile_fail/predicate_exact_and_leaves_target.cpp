// expect: predicate_exact_and_can_leave_target_exclusive
// A predicate cannot both promise the target's value and leave the target.
#include <allotheque/allotheque.hpp>

namespace al = allotheque;

struct confused : al::first_fit {
    static constexpr bool exact = true;
};

al::rb_tree<al::size, al::list<void>, confused>::header_type h;
