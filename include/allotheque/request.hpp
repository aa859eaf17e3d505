// A request is the set of attribute values an allocation asks for. Each
// container reads the attribute it partitions by from the request; the size and
// a hint address are always present, further attributes ride along by type.
#pragma once
#include <cstddef>
#include <tuple>
#include <type_traits>

namespace allotheque {

struct request {
    std::size_t size = 0;
    const void* hint = nullptr;   // an address the new block should be near; nullptr = no preference
    std::size_t alignment = 0;    // 0 = the heap's natural alignment for this size
    bool zero = false;            // the block must read as zero (calloc); heaps skip clearing fresh memory
};

// A request carrying extra attribute values, e.g. a call site. `Values` are the
// attributes' value holders; `get<V>()` finds one by type.
template <class... Values>
struct request_with : request {
    std::tuple<Values...> values;

    template <class V>
    [[nodiscard]] constexpr const V& get() const noexcept { return std::get<V>(values); }
};

template <class R>
concept request_like = std::is_base_of_v<request, R>;

// A request whose size a heap has already resolved to a size class (see
// hash_table::classify): the size level reads the class instead of hashing.
template <request_like R>
struct classified : R {
    std::size_t class_index = 0;
};

} // namespace allotheque
