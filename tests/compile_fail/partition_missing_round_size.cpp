// expect: partition_has_round_size
// A hand-written terminal container that forgets round_size: nested in a list,
// the diagnostic names the missing member.
#include <allotheque/allotheque.hpp>

namespace al = allotheque;

struct pile {   // a LIFO of chunks, as list<void>, minus round_size
    struct chunk {
        chunk* next;
    };
    using header_type = chunk*;
    static constexpr std::size_t min_chunk = sizeof(chunk);
    static constexpr bool size_exact = false, address_safe = true, stored_in_chunks = true;
    static constexpr bool reads_size = false, reads_address = false;
    static void init(header_type& h) noexcept { h = nullptr; }
    static void destroy(header_type&) noexcept {}
    static bool prepare(header_type&, std::byte*, std::size_t) noexcept { return true; }
    static bool empty(const header_type& h) noexcept { return h == nullptr; }
    static bool accepts(const std::byte*, std::size_t, const al::request&) noexcept { return true; }
    static std::byte* allocate(header_type& h, const al::request&) noexcept {
        chunk* c = h;
        if (c) h = c->next;
        return reinterpret_cast<std::byte*>(c);
    }
    static void deallocate(header_type& h, std::byte* p, std::size_t) noexcept { h = ::new (p) chunk{h}; }
};

al::list<al::size, pile, al::match>::header_type h;
