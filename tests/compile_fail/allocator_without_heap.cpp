// expect-first: deleted (function|constructor).*allotheque::allocator
// A container declared with an allotheque::allocator but no heap: the first
// error is the allocator's deleted default constructor, whose declaration
// (shown with it) says what to write instead (issue 34, item 8).
#include <allotheque/allotheque.hpp>

#include <vector>

namespace al = allotheque;
std::vector<int, al::allocator<int, al::segregated_heap<>>> v;
