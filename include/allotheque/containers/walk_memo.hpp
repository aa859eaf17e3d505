// What a fallback walk learned, kept so the next walk need not repeat it.
// The guide (search.hpp, guided_cursor) of rb_tree's fallback walk; hash_table
// guides with a size directory instead (size_directory.hpp), which a tree,
// living in chunks, cannot map.
//
// A fallback predicate walks the classes in order for the first one that can
// serve a size. Walking from the first class every time makes an exhausted or
// aged heap quadratic (every miss visits every class before a refill), so a
// container keeps, per request size (direct-mapped, tagged with the size), a
// lower bound on the position of the first class holding that size — raised to
// where a walk ended, lowered when a chunk of that size comes back — and, once a
// walk has come up empty, the exact number of such chunks left, so a walk that
// cannot succeed is not started. The walk's answer is unchanged. Sound only
// when the levels below keep exact sizes (a class holds a size or it does not).
#pragma once
#include <cstddef>

namespace allotheque {

template <class Position, std::size_t Slots = 64>
class walk_memo {
    struct slot_type {
        std::size_t size = 0;
        Position from{};
        bool bounded = false;   // false: the size is known to be absent past the last walk
        bool counted = false;   // count is exact
        std::size_t count = 0;
    };
    slot_type slots_[Slots] = {};
    slot_type& slot(std::size_t size) noexcept { return slots_[(size / 8) % Slots]; }

public:
    enum class start_kind { from_first, from_bound, nothing };
    struct start {
        start_kind kind;
        Position from;
    };

    start where_to_start(std::size_t size) noexcept {
        const slot_type& m = slot(size);
        if (m.size != size) return {start_kind::from_first, Position{}};
        if (!m.bounded || (m.counted && m.count == 0)) return {start_kind::nothing, Position{}};
        return {start_kind::from_bound, m.from};
    }
    void walk_found(std::size_t size, Position at) noexcept {
        slot_type& m = slot(size);
        if (m.size == size) {
            m.from = at;
            m.bounded = true;
        } else {
            m = slot_type{size, at, true, false, 0};
        }
    }
    void walk_failed(std::size_t size) noexcept { slot(size) = slot_type{size, Position{}, false, true, 0}; }
    void chunk_added(std::size_t size, Position at, std::size_t how_many = 1) noexcept {
        slot_type& m = slot(size);
        if (m.size != size) return;
        if (!m.bounded || at < m.from) {
            m.from = at;
            m.bounded = true;
        }
        if (m.counted) m.count += how_many;
    }
    void chunk_taken(std::size_t size) noexcept {
        slot_type& m = slot(size);
        // A host chunk that no walk could reach may still be taken later (see
        // list.hpp): never let the count wrap.
        if (m.size == size && m.counted && m.count > 0) --m.count;
    }
};

} // namespace allotheque
