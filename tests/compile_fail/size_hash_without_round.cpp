// expect: a size hash must say which chunk size serves each class
// A hash over sizes that does not round requests to its classes.
#include <allotheque/allotheque.hpp>

namespace al = allotheque;
struct size_mod_64 {
    static constexpr bool exact = true;
    template <class Attr>
    static constexpr std::size_t index_of(typename Attr::value_type v) noexcept { return v % 64; }
    template <class Attr, class Header, class Init>
    using index = al::dense_index<64, Header, Init>;
};
al::heap<al::hash_table<al::size, al::list<void>, al::match_only, size_mod_64>> h;
