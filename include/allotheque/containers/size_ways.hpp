// `size_ways<Hash, Ways>`: a class's exact sizes in a small set-associative
// table — `Ways` stacks, each tagged with the size class it holds (Hash's
// classes), and a list of sizes for what does not fit. The table of sizes a
// class of an address-keyed hash_table can afford when its classes are small:
// Medius' 4 KiB pages, where a direct table of the 45 classes up to 64 KiB
// (what Velox' 64 KiB vicinities nest) cost 9.5 % of the Olden programs' peak
// memory. Two ways cost 32 bytes a page (0.8 %), and a heap's page holds one
// span's chunks, so of one size: the list is for the classes that alias
// (Medius' pages every 256 MiB) and for partitions fed chunks of any size.
//
// Over it, hash_table runs the same sized search as over a direct table
// (size_fronts), with two differences a direct table does not have:
//   - a way whose stack is empty is claimed by the next size freed there
//     (claim_chunks), so a front naming that stack for its old size must go;
//   - a size's chunks may also lie in the list (spilled), which a search
//     looks at once the size's way is empty, so a class's directory bit for
//     the size stays until both are.
//   hash_table<size ...> as a table of Ways ways ∘ list<void>, overflow list<size, match> ∘ list<void>
#pragma once
#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>

#include <allotheque/attributes/size.hpp>
#include <allotheque/containers/list.hpp>
#include <allotheque/detail/bitmap_tree.hpp>
#include <allotheque/hashes/hash_function.hpp>
#include <allotheque/predicates/match.hpp>
#include <allotheque/request.hpp>

namespace allotheque {

// What a way's tag names: one of finitely many exact size classes.
template <class H>
concept bounded_exact_size_classes = requires {
    { H::exact } -> std::convertible_to<bool>;
    { H::max_size } -> std::convertible_to<std::size_t>;
} && H::exact && H::max_size != ~std::size_t{0};

template <class Hash, unsigned Ways = 2>
struct size_ways {
    static_assert(Ways >= 1, "size_ways: at least one way");
    static_assert(bounded_exact_size_classes<Hash>,
                  "size_ways: Hash must have exact, bounded size classes (spaced_classes<..., MaxSize>)");
    using stacks = list<void>;
    using spill = list<size, list<void>, match>;
    using chunk_list = stacks::header_type;
    static constexpr std::size_t npos = detail::npos;
    static constexpr std::size_t size_classes = classify_size<Hash, size>(Hash::max_size).index + 1;
    static_assert(size_classes < 255, "size_ways: a way's tag is one byte");
    static constexpr std::uint8_t untagged = 0xff;

    struct header_type {
        chunk_list ways[Ways];
        spill::header_type spilled;
        std::uint8_t tags[Ways];
        header_type() noexcept { std::fill(std::begin(tags), std::end(tags), untagged); }
    };

    static constexpr bool indexes_sizes = true;
    static constexpr bool spills = true;
    // A class is small (a page), so a size's stack holds few chunks and is
    // often empty (size_fronts::notes_every_miss).
    static constexpr bool few_chunks_a_size = true;
    static constexpr std::size_t min_chunk = std::max(stacks::min_chunk, spill::min_chunk);
    static constexpr std::size_t max_chunk = Hash::max_size;
    static constexpr bool size_exact = true;
    static constexpr bool address_safe = true;
    static constexpr bool reads_size = true;
    static constexpr bool reads_address = false;
    static constexpr bool stored_in_chunks = true;

    static void init(header_type& h) noexcept { ::new (static_cast<void*>(&h)) header_type(); }
    static void destroy(header_type&) noexcept {}
    static bool prepare(header_type&, std::byte*, std::size_t) noexcept { return true; }
    static bool empty(const header_type& h) noexcept {
        for (const chunk_list& l : h.ways)
            if (!stacks::empty(l)) return false;
        return spill::empty(h.spilled);
    }
    [[gnu::always_inline]] static constexpr std::size_t round_size(std::size_t n) noexcept { return Hash::round(n); }
    [[gnu::always_inline]] static std::size_t size_class_of(std::size_t n) noexcept {
        return classify_size<Hash, size>(n).index;
    }
    // The chunk size of class k, where the classes say (spaced_classes).
    static constexpr std::size_t class_bytes(std::size_t k) noexcept
        requires requires { Hash::size_of_class(k); }
    {
        return Hash::size_of_class(k);
    }
    static constexpr size_class classify(std::size_t n) noexcept { return classify_size<Hash, size>(n); }
    template <request_like R>
    static bool accepts(const std::byte*, std::size_t n, const R& r) noexcept {
        return Hash::round(r.size) == n;
    }

    // The stack tagged k, or nullptr.
    [[gnu::always_inline]] static chunk_list* find_chunks(header_type& h, std::size_t k) noexcept {
        for (unsigned w = 0; w < Ways; ++w)
            if (h.tags[w] == k) return &h.ways[w];
        return nullptr;
    }
    // The stack a chunk of class k goes on: the one tagged k, else an empty
    // one retagged (`evicted`: the class it held, npos if none), else
    // nullptr: the chunk is spilled.
    struct claim {
        chunk_list* chunks;
        std::size_t evicted;
    };
    static claim claim_chunks(header_type& h, std::size_t k) noexcept {
        if (chunk_list* l = find_chunks(h, k)) return {l, npos};
        for (unsigned w = 0; w < Ways; ++w)
            if (stacks::empty(h.ways[w])) {
                const std::size_t old = h.tags[w] == untagged ? npos : h.tags[w];
                h.tags[w] = static_cast<std::uint8_t>(k);
                return {&h.ways[w], old};
            }
        return {nullptr, npos};
    }
    // The emptiness test inline, the list's search a call: few classes ever
    // spill, and inlined into size_fronts' search (g++'s choice once the
    // malloc unit may grow) the list's walk took registers that every search
    // saved (the Medius library, random sizes: 168.8 -> 166.7 instructions a
    // step without it).
    [[gnu::always_inline]] static std::byte* take_spilled(header_type& h, std::size_t n) noexcept {
        return spill::empty(h.spilled) ? nullptr : search_spilled(h, n);
    }
    [[gnu::noinline]] static std::byte* search_spilled(header_type& h, std::size_t n) noexcept {
        return spill::allocate(h.spilled, request{n});
    }
    static void put_spilled(header_type& h, std::byte* p, std::size_t n) noexcept { spill::deallocate(h.spilled, p, n); }

    [[gnu::always_inline]] static bool holds_chunks(const chunk_list& l) noexcept { return !stacks::empty(l); }
    [[gnu::always_inline]] static std::byte* pop_chunk(chunk_list& l) noexcept { return stacks::allocate(l, request{}); }
    [[gnu::always_inline]] static void push_chunk(chunk_list& l, std::byte* p, std::size_t n) noexcept {
        stacks::deallocate(l, p, n);
    }

    // As a partition of its own (a free run, a drain, a parent without the
    // sized search): the same ways and list.
    template <request_like R>
    static std::byte* allocate(header_type& h, const R& r) noexcept {
        const std::size_t n = Hash::round(r.size);
        if (chunk_list* l = find_chunks(h, size_class_of(n)))
            if (std::byte* p = pop_chunk(*l)) return p;
        return take_spilled(h, n);
    }
    static void deallocate(header_type& h, std::byte* p, std::size_t n) noexcept {
        if (chunk_list* l = claim_chunks(h, size_class_of(n)).chunks) push_chunk(*l, p, n);
        else put_spilled(h, p, n);
    }
    // A run of one size: one claim, and the stack links it as it would have
    // (its first chunk on top).
    static void deallocate_run(header_type& h, std::byte* const* ps, std::size_t count, std::size_t n) noexcept {
        if (chunk_list* l = claim_chunks(h, size_class_of(n)).chunks) deallocate_run_in<stacks>(*l, ps, count, n);
        else deallocate_run_in<spill>(h.spilled, ps, count, n);
    }
    static void deallocate_range(header_type& h, std::byte* p, std::size_t count, std::size_t n) noexcept {
        if (chunk_list* l = claim_chunks(h, size_class_of(n)).chunks) deallocate_range_in<stacks>(*l, p, count, n);
        else deallocate_range_in<spill>(h.spilled, p, count, n);
    }
    template <class F>
    static void drain(header_type& h, F&& f) noexcept {
        for (chunk_list& l : h.ways) stacks::drain(l, f);
        spill::drain(h.spilled, f);
    }
    static void clear(header_type& h) noexcept { init(h); }
};

} // namespace allotheque
