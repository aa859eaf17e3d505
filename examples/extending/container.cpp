// Writing a container: `colour_table<Attr, Nested, Pred>`, the classes of a
// narrow attribute (at most 2^12 values) in a plain array inside the header,
// with a bitset of the non-empty ones. It satisfies the partition concept and,
// like every container, allocates through the predicate hook; its cursor also
// offers lower_bound and prev, so fit predicates and `nearest` take their fast
// paths on it. Here it holds page colours: skbit<12, 4>, the page number modulo
// 16 (pages 64 KiB apart share a colour).
#include <allotheque/allotheque.hpp>

#include <bitset>
#include <cstdint>
#include <cstdio>
#include <map>
#include <new>
#include <set>
#include <vector>

namespace al = allotheque;

template <al::bounded_attribute Attr, al::partition Nested, al::allocation_predicate Pred>
struct colour_table {
    static_assert(Attr::width <= 12, "colour_table: the table of 2^width classes lives in the header");
    static_assert(Nested::stored_in_chunks, "colour_table: nested headers are kept in the table, not prepared");
    static constexpr std::size_t classes = std::size_t{1} << Attr::width;
    using nested_header = typename Nested::header_type;
    struct alignas(nested_header) slot {
        std::byte raw[sizeof(nested_header)];
    };
    struct header_type {
        slot nested[classes];           // built by Nested::init, one per class
        std::bitset<classes> live;      // classes that hold a chunk
        std::size_t last = al::detail::npos;
    };

    static constexpr std::size_t min_chunk = Nested::min_chunk;
    static constexpr bool size_exact = (al::size_attribute<Attr> && al::is_exact_match<Pred>) || Nested::size_exact;
    static constexpr bool address_safe =
        (!al::address_attribute<Attr> || al::can_leave_target<Pred>) && Nested::address_safe;
    static constexpr bool stored_in_chunks = false;   // 2^width headers: the outermost level only
    static constexpr bool reads_size = al::size_attribute<Attr> || Nested::reads_size;
    static constexpr bool reads_address = al::address_attribute<Attr> || Nested::reads_address;

    static nested_header& nested(header_type& h, std::size_t i) noexcept {
        return *std::launder(reinterpret_cast<nested_header*>(h.nested[i].raw));
    }
    static void init(header_type& h) noexcept {
        ::new (static_cast<void*>(&h)) header_type();
        for (std::size_t i = 0; i < classes; ++i) Nested::init(nested(h, i));
    }
    static void destroy(header_type& h) noexcept {
        for (std::size_t i = 0; i < classes; ++i) Nested::destroy(nested(h, i));
        h.~header_type();
    }
    static bool prepare(header_type&, std::byte*, std::size_t) noexcept { return true; }
    static bool empty(const header_type& h) noexcept { return h.live.none(); }
    static constexpr std::size_t round_size(std::size_t n) noexcept { return Nested::round_size(n); }
    template <al::request_like R>
    static bool accepts(const std::byte* p, std::size_t n, const R& r) noexcept {
        return al::value_accepts<Pred>(Attr::of_chunk(p, n), Attr::of_request(r)) && Nested::accepts(p, n, r);
    }

    // The predicate's view: a class is its index, classes ascend.
    struct cursor {
        using handle = std::size_t;
        using value_type = typename Attr::value_type;
        header_type& h;
        handle none() const noexcept { return al::detail::npos; }
        handle first() const noexcept { return lower_bound(0); }
        handle next(handle i) const noexcept { return lower_bound(i + 1); }
        handle lookup(value_type v) const noexcept { return v < classes && h.live[v] ? v : none(); }
        value_type value(handle i) const noexcept { return i; }
        handle last() const noexcept { return h.last != none() && h.live[h.last] ? h.last : none(); }
        // Capabilities (containers/search.hpp): ordered and bidirectional.
        handle lower_bound(value_type v) const noexcept {
            for (std::size_t i = v; i < classes; ++i)
                if (h.live[i]) return i;
            return none();
        }
        handle prev(handle i) const noexcept {
            for (std::size_t j = i == none() ? classes : i; j-- > 0;)
                if (h.live[j]) return j;
            return none();
        }
    };
    static_assert(al::bidirectional_cursor<cursor>);

    template <al::request_like R>
    static std::byte* allocate(header_type& h, const R& r) noexcept {
        cursor c{h};
        return al::search<Pred>(c, Attr::of_request(r), [&](std::size_t i) noexcept -> std::byte* {
            std::byte* p = Nested::allocate(nested(h, i), r);
            if (!p) return nullptr;
            if (Nested::empty(nested(h, i))) h.live.reset(i);
            if constexpr (al::predicate_remembers<Pred>) h.last = i;
            return p;
        });
    }
    static void deallocate(header_type& h, std::byte* p, std::size_t n) noexcept {
        const std::size_t i = Attr::of_chunk(p, n);
        Nested::deallocate(nested(h, i), p, n);
        h.live.set(i);
    }

    // What a heap needs to give fully free spans back: every free chunk to f
    // (drain), or all of them forgotten at once (clear); the table ends empty.
    template <class F>
    static void drain(header_type& h, F&& f) noexcept {
        for (std::size_t i = 0; i < classes; ++i)
            if (h.live[i]) Nested::drain(nested(h, i), f);
        forget(h);
    }
    static void clear(header_type& h) noexcept {
        for (std::size_t i = 0; i < classes; ++i)
            if (h.live[i]) Nested::clear(nested(h, i));
        forget(h);
    }

private:
    static void forget(header_type& h) noexcept {
        h.live.reset();
        h.last = al::detail::npos;
    }
};

using colour = al::skbit<12, 4>;
using coloured = colour_table<colour, al::list<al::size, al::list<void>, al::match>, al::nearest>;
static_assert(al::partition<coloured>);

std::uint64_t colour_of(const void* p) { return colour::of_chunk(static_cast<const std::byte*>(p), 0); }
std::uint64_t distance(std::uint64_t a, std::uint64_t b) { return a > b ? a - b : b - a; }

int main() {
    al::heap<coloured, al::mmap_source> heap;
    constexpr std::size_t n = 48;
    // Fill some pages, then free every block of two colours, keeping the rest.
    std::vector<void*> blocks;
    for (int i = 0; i < 3000; ++i) blocks.push_back(heap.allocate(al::request{n}));
    std::map<std::uint64_t, std::set<void*>> freed;   // colour -> blocks we freed
    std::vector<void*> live;
    for (void* p : blocks) {
        const auto c = colour_of(p);
        if (c == 3 || c == 9) {
            heap.deallocate(p, al::request{n});
            freed[c].insert(p);
        } else {
            live.push_back(p);
        }
    }
    int failures = 0;
    // Hints of every colour: the block lands in the nearest colour that has
    // one of the freed blocks, or in one even nearer (free chunks the heap
    // carved but never handed out).
    std::printf("hint colour -> block colour:");
    for (std::uint64_t want = 0; want < 16; ++want) {
        const void* hint = nullptr;
        for (void* p : live)
            if (colour_of(p) == want) hint = p;
        if (!hint) continue;
        void* p = heap.allocate(al::request{n, hint, 0});
        std::printf(" %llu->%llu", static_cast<unsigned long long>(want), static_cast<unsigned long long>(colour_of(p)));
        for (const auto& [c, ps] : freed)
            if (!ps.empty() && distance(c, want) < distance(colour_of(p), want)) ++failures;
        if (auto it = freed.find(colour_of(p)); it != freed.end()) it->second.erase(p);
        live.push_back(p);
    }
    std::puts("");
    for (void* p : live) heap.deallocate(p, al::request{n});
    std::puts(failures == 0 ? "ok: every block went to the nearest colour with room" : "FAIL");
    return failures == 0 ? 0 : 1;
}
