// `hash_table<Attr, Nested, Pred, Hash>`: classes of `Attr` in a table indexed
// by a hash function (see hashes/). Lookup is one index; "first non-empty" and
// "next non-empty" come from the index's bitmaps, so the fallback predicates do
// not walk empty classes. The table lives in the heap's root (or is mapped), not
// in chunks, so a hash table is the outermost level of a partition.
#pragma once
#include <cstddef>
#include <new>
#include <type_traits>

#include <allotheque/attributes/attribute.hpp>
#include <allotheque/containers/class_index.hpp>
#include <allotheque/containers/class_node.hpp>
#include <allotheque/containers/partition.hpp>
#include <allotheque/containers/search.hpp>
#include <allotheque/hashes/hash_function.hpp>

namespace allotheque {

template <attribute Attr, partition Nested, allocation_predicate Pred, hash_function<Attr> Hash>
struct hash_table {
    static_assert(!size_attribute<Attr> || size_segregation<Hash>,
                  "allotheque::hash_table: a size hash must say which chunk size serves each class (round)");
    static_assert(requires { typename Hash::template index<Attr, int, hash_init_placeholder>; },
                  "allotheque::hash_table: this hash function cannot index this attribute");

    struct init_header {
        void operator()(typename Nested::header_type& h) const noexcept { Nested::init(h); }
    };
    using index_type = typename Hash::template index<Attr, typename Nested::header_type, init_header>;
    // The fallback walk looks for the lowest class that can serve a size. Walking
    // from the first class every time makes an exhausted heap quadratic, so the
    // table keeps, per request size (direct-mapped, tagged), a lower bound on the
    // first class that holds it (raised to where a walk ended, lowered when a
    // chunk of that size comes back) and, once a walk has come up empty, the exact
    // number of such chunks left, so a walk that cannot succeed is not started.
    // Same answers as a full walk. Needs exact sizes below this level.
    struct walk_memo {
        std::size_t size = 0;
        std::size_t from = 0;
        std::size_t count = 0;
        bool counted = false;
    };
    static constexpr bool memoised =
        Pred::fallback != fallback_to::none && !size_attribute<Attr> && Nested::size_exact;
    static constexpr std::size_t memo_slots = 64;
    struct header_type {
        index_type classes;
        std::size_t last = npos;
        [[no_unique_address]] detail::slot<memoised, walk_memo[memo_slots]> memo{};
    };

    static constexpr std::size_t min_chunk = Nested::min_chunk;
    static constexpr bool size_exact =
        (size_attribute<Attr> && is_exact_match<Pred> && Hash::exact) || Nested::size_exact;
    static constexpr bool address_safe = (!address_attribute<Attr> || can_leave_target<Pred>) && Nested::address_safe;
    static constexpr bool reads_size = size_attribute<Attr> || Nested::reads_size;
    static constexpr bool reads_address = address_attribute<Attr> || Nested::reads_address;
    static constexpr bool stored_in_chunks = false;

    static void init(header_type& h) { ::new (static_cast<void*>(&h)) header_type(); }
    static void destroy(header_type& h) noexcept { h.~header_type(); }
    static bool empty(const header_type& h) noexcept { return h.classes.first() == npos; }
    static constexpr std::size_t round_size(std::size_t n) noexcept {
        if constexpr (size_attribute<Attr>) return Nested::round_size(Hash::round(n));
        else return Nested::round_size(n);
    }
    template <request_like R>
    static bool accepts(const std::byte* p, std::size_t n, const R& r) noexcept {
        return value_accepts<Pred>(class_of(Attr::of_chunk(p, n)), class_of(Attr::of_request(r))) &&
               Nested::accepts(p, n, r);
    }
    // Makes sure every class a chunk in [p, p+n) can fall in has its metadata.
    static bool prepare(header_type& h, std::byte* p, std::size_t n) noexcept {
        if constexpr (address_attribute<Attr>)
            return h.classes.prepare(class_of(Attr::of_chunk(p, n)), class_of(Attr::of_chunk(p + n - 1, 1)));
        else return true;
    }
    static std::size_t metadata_bytes(const header_type& h) noexcept { return h.classes.metadata_bytes(); }

    struct cursor {
        using handle = std::size_t;
        using value_type = std::size_t;
        header_type& h;
        handle none() const noexcept { return npos; }
        handle first() const noexcept { return h.classes.first(); }
        handle next(handle i) const noexcept { return h.classes.next(i); }
        handle lookup(value_type i) const noexcept { return h.classes.contains(i) ? i : npos; }
        value_type value(handle i) const noexcept { return i; }
        handle last() const noexcept { return h.last != npos && h.classes.contains(h.last) ? h.last : npos; }
    };
    struct memo_cursor : cursor {
        std::size_t size;
        walk_memo& slot() const noexcept { return this->h.memo[(size / 8) % memo_slots]; }
        std::size_t walk_start() const noexcept {
            const walk_memo& m = slot();
            if (m.size != size) return this->first();
            if (m.from == npos || (m.counted && m.count == 0)) return npos;
            return this->h.classes.contains(m.from) ? m.from : this->h.classes.next(m.from);
        }
        void walk_ended(std::size_t at) const noexcept {
            walk_memo& m = slot();
            if (at == npos) m = walk_memo{size, npos, 0, true};
            else if (m.size == size) m.from = at;
            else m = walk_memo{size, at, 0, false};
        }
    };

    template <request_like R>
    static std::byte* allocate(header_type& h, const R& r) noexcept {
        if constexpr (Pred::start == start_at::begin &&
                      (Pred::stop == stop_when::greater_equal || Pred::stop == stop_when::min_fit)) {
            // Classes are ordered: start at the target class, skip empty ones by bitmap.
            const std::size_t target = class_of(Attr::of_request(r));
            for (std::size_t i = target == 0 ? h.classes.first() : h.classes.next(target - 1); i != npos;
                 i = h.classes.next(i))
                if (std::byte* p = take_from(h, i, r)) return p;
            return nullptr;
        }
        auto c = [&] {
            if constexpr (memoised) return memo_cursor{{h}, r.size};
            else return cursor{h};
        }();
        return search<Pred>(c, class_of(Attr::of_request(r)),
                            [&](std::size_t i) noexcept -> std::byte* { return take_from(h, i, r); });
    }

    // Takes chunk [p, p+n) out wherever it is (what a simultaneous partition
    // needs when another partition claims the chunk). Needs a nested partition
    // that can remove an element.
    static void remove(header_type& h, std::byte* p, std::size_t n) noexcept
        requires requires(typename Nested::header_type& nh) { Nested::remove(nh, p, n); }
    {
        const std::size_t i = class_of(Attr::of_chunk(p, n));
        auto& nested = *h.classes.find(i);
        Nested::remove(nested, p, n);
        if (Nested::empty(nested)) h.classes.release(i);
    }

    static void deallocate(header_type& h, std::byte* p, std::size_t n) noexcept {
        const std::size_t i = class_of(Attr::of_chunk(p, n));
        if constexpr (memoised) {
            walk_memo& m = h.memo[(n / 8) % memo_slots];
            if (m.size == n) {
                if (m.from == npos || i < m.from) m.from = i;
                m.count += m.counted;
            }
        }
        Nested::deallocate(h.classes.obtain(i), p, n);
    }

    // One class lookup per run of consecutive chunks that share a class.
    static void deallocate_run(header_type& h, std::byte* const* ps, std::size_t count, std::size_t n) noexcept {
        while (count > 0) {
            const std::size_t k =
                same_class_run(ps, count, [n](std::byte* p) { return class_of(Attr::of_chunk(p, n)); });
            const std::size_t i = class_of(Attr::of_chunk(ps[0], n));
            if constexpr (memoised) {
                walk_memo& m = h.memo[(n / 8) % memo_slots];
                if (m.size == n && (m.from == npos || i < m.from)) m.from = i;
            }
            deallocate_run_in<Nested>(h.classes.obtain(i), ps, k, n);
            ps += k;
            count -= k;
        }
    }

private:
    template <request_like R>
    static std::byte* take_from(header_type& h, std::size_t i, const R& r) noexcept {
        auto& nested = *h.classes.find(i);
        std::byte* p = Nested::allocate(nested, r);
        if (!p) return nullptr;
        if constexpr (memoised) {
            walk_memo& m = h.memo[(r.size / 8) % memo_slots];
            if (m.size == r.size && m.counted) --m.count;
        }
        if (Nested::empty(nested)) h.classes.release(i);
        if constexpr (Pred::remembers) h.last = i;
        return p;
    }
    static constexpr std::size_t class_of(typename Attr::value_type v) noexcept {
        return Hash::template index_of<Attr>(v);
    }
};

} // namespace allotheque
