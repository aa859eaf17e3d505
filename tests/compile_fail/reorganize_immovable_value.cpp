// expect: is_copy_constructible_v
// hinted_map::reorganize() on a value that can neither be moved without
// throwing nor copied (a mutex): there is no way to relocate it, so the
// member does not exist for it.
#include <functional>
#include <mutex>

#include <allotheque/allocators/velox.hpp>
#include <allotheque/stl/hinted_map.hpp>

int main() {
    allotheque::velox_heap<> h;
    allotheque::hinted_map<int, std::mutex, std::less<>, allotheque::velox_heap<>> m(h);
    m.try_emplace(1);
    m.reorganize();
}
