// expect: predicate_declares_can_leave_target
// A predicate written with the protocol that forgets a required trait: the
// diagnostic names the requirement.
#include <allotheque/allotheque.hpp>

namespace al = allotheque;

struct lowest {
    static constexpr bool exact = false;
    template <class C, class Attempt>
    static std::byte* search(C& c, typename C::value_type, Attempt&& attempt) {
        for (auto h = c.first(); h != c.none(); h = c.next(h))
            if (std::byte* p = attempt(h)) return p;
        return nullptr;
    }
};

al::list<al::page, al::list<al::size, al::list<void>, al::match>, lowest>::header_type h;
