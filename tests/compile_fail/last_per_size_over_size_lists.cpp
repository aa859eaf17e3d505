// expect-first: keeps the class used last per size
// match_size_last_first keeps the class used last in each size's front,
// which only a table of sizes has (size_fronts): over lists of sizes it would
// silently keep no class used last at all, so it is refused.
#include <allotheque/allocators/velox.hpp>

using lists_of_sizes = allotheque::hash_table<allotheque::vicinity<16>,
                                              allotheque::list<allotheque::size, allotheque::list<void>, allotheque::match>,
                                              allotheque::match_size_last_first, allotheque::sparse_identity>;
static_assert(sizeof(lists_of_sizes::header_type) > 0);
