// expect: hash_declares_exact
// A hash function that does not say whether its classes hold one size.
#include <allotheque/allotheque.hpp>

namespace al = allotheque;

struct halves {
    template <class Attr>
    static constexpr std::size_t index_of(typename Attr::value_type n) noexcept { return n / 2; }
    static constexpr std::size_t round(std::size_t n) noexcept { return n; }
    template <class Attr, class Header, class Init>
    using index = al::dense_index<64, Header, Init>;
};

al::hash_table<al::size, al::list<void>, al::match_only, halves>::header_type h;
