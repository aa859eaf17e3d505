// A request is the set of attribute values an allocation asks for. Each
// container reads the attribute it partitions by from the request; the size and
// a hint address are always present, further attributes ride along by type.
#pragma once
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

namespace allotheque {

struct request {
    std::size_t size = 0;
    const void* hint = nullptr;   // an address the new block should be near; nullptr = no preference
    std::size_t alignment = 0;    // 0 = the heap's natural alignment for this size
    bool zero = false;            // the block must read as zero (calloc); heaps skip clearing fresh memory
};

// A request carrying extra attribute values, e.g. a call site. `Values` are the
// attributes' value holders; `get<V>()` finds one by type. Built from a plain
// request and the values, `request_with<V>{request{64}, V{...}}`, or with the
// types deduced, `with(request{64}, V{...})`.
template <class... Values>
struct request_with : request {
    std::tuple<Values...> values;

    constexpr request_with() = default;
    // Explicit with no values: a plain request would otherwise turn into a
    // request_with<> wherever one is expected, without anyone asking.
    constexpr explicit(sizeof...(Values) == 0) request_with(const request& r, Values... vs)
        : request(r), values(std::move(vs)...) {}

    template <class V>
    [[nodiscard]] constexpr const V& get() const noexcept { return std::get<V>(values); }
    template <class V>
    [[nodiscard]] constexpr V& get() noexcept { return std::get<V>(values); }
};

template <class... Values>
[[nodiscard]] constexpr request_with<std::decay_t<Values>...> with(const request& r, Values&&... vs) {
    return request_with<std::decay_t<Values>...>(r, std::forward<Values>(vs)...);
}

template <class R>
concept request_like = std::is_base_of_v<request, R>;

// A request whose size a heap has already resolved to a size class (see
// hash_table::classify): the size level reads the class instead of hashing.
template <request_like R>
struct classified : R {
    std::size_t class_index = 0;
};

} // namespace allotheque
