// expect: is_copy_constructible_v
// hinted_list::reorganize() on a value that can neither be moved without
// throwing nor copied (a mutex): the member does not exist for it, as for
// the trees (reorganize_immovable_value.cpp).
#include <mutex>

#include <allotheque/allocators/velox.hpp>
#include <allotheque/stl/hinted_list.hpp>

int main() {
    allotheque::velox_heap<> h;
    allotheque::hinted_list<std::mutex, allotheque::velox_heap<>> l(h);
    l.emplace_back();
    l.reorganize();
}
