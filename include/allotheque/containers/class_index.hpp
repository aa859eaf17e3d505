// Where a hash table keeps its classes. A class's header is constructed when
// the class becomes non-empty and simply abandoned when it empties, so a table
// of untouched (zero) memory is valid: large tables are mapped lazily.
//
//   dense_index<N, H>:  N headers in one table, plus a bitmap tree of non-empty
//                       classes (inline when small, mapped otherwise).
//   sparse_index<B, H>: 2^B classes as a two-level radix: leaves of 4096
//                       classes are mapped on demand (by `prepare`, before any
//                       chunk of theirs exists), a bitmap tree over leaves and
//                       one inside each leaf find the lowest/next non-empty
//                       class in a few count-trailing-zeros.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

#include <allotheque/detail/bitmap_tree.hpp>
#include <allotheque/detail/mapped_array.hpp>

namespace allotheque {

using detail::npos;

namespace detail {
inline constexpr std::size_t inline_table_limit = 4096;   // bytes kept inside the heap object

template <class T, std::size_t N, bool Inline = N * sizeof(T) <= inline_table_limit>
struct table_storage {
    std::array<T, N> items{};
    T* data() noexcept { return items.data(); }
};
template <class T, std::size_t N>
struct table_storage<T, N, false> {
    mapped_array<T> items{N};
    T* data() noexcept { return items.data(); }
};

// Raw, uninitialised room for one header: constructed on demand.
template <class H>
struct alignas(H) header_slot {
    std::byte raw[sizeof(H)];
};
} // namespace detail

template <std::size_t N, class Header, class Init>
class dense_index {
    using bitmap = detail::bitmap_tree<N>;

public:
    static constexpr std::size_t classes = N;

    // Forced inline, as sparse_index's: a bit test on Medius' free and search
    // paths, which g++ called out of line once free was inlined into each
    // malloc entry point (Medius, random sizes: 199 -> 204 instructions a step).
    [[gnu::always_inline]] Header* find(std::size_t i) noexcept { return live().test(i) ? slot(i) : nullptr; }
    bool contains(std::size_t i) const noexcept { return i < N && const_cast<dense_index*>(this)->live().test(i); }
    Header& obtain(std::size_t i) noexcept {
        if (!live().test(i)) {
            Init{}(*slot(i));
            live().set(i);
        }
        return *slot(i);
    }
    void release(std::size_t i) noexcept { live().reset(i); }
    std::size_t first() const noexcept { return next_from(0); }
    std::size_t next(std::size_t i) const noexcept { return next_from(i + 1); }
    bool prepare(std::size_t, std::size_t) noexcept { return true; }
    std::size_t metadata_bytes() const noexcept { return sizeof(*this) > 0 ? N * sizeof(Header) : 0; }

private:
    std::size_t next_from(std::size_t i) const noexcept {
        return const_cast<dense_index*>(this)->live().find_next(i);
    }
    bitmap live() noexcept { return bitmap(bits_.data()); }
    Header* slot(std::size_t i) noexcept { return std::launder(reinterpret_cast<Header*>(&headers_.data()[i])); }

    detail::table_storage<std::uint64_t, bitmap::storage_words> bits_;
    detail::table_storage<detail::header_slot<Header>, N> headers_;
};

// Every header built at construction, no bitmap: for small tables searched by
// lookup only. first/next enumerate all classes, empty or not.
template <std::size_t N, class Header, class Init>
class direct_index {
public:
    static constexpr std::size_t classes = N;
    direct_index() noexcept {
        for (Header& h : headers_) Init{}(h);
    }
    direct_index(const direct_index&) = delete;
    direct_index& operator=(const direct_index&) = delete;
    Header* find(std::size_t i) noexcept { return &headers_[i]; }
    bool contains(std::size_t i) const noexcept { return i < N; }
    Header& obtain(std::size_t i) noexcept { return headers_[i]; }
    void release(std::size_t) noexcept {}
    std::size_t first() const noexcept { return 0; }
    std::size_t next(std::size_t i) const noexcept { return i + 1 < N ? i + 1 : npos; }
    bool prepare(std::size_t, std::size_t) noexcept { return true; }
    std::size_t metadata_bytes() const noexcept { return 0; }

private:
    Header headers_[N];
};

template <unsigned Bits, class Header, class Init>
class sparse_index {
    static constexpr unsigned leaf_bits = Bits < 12 ? Bits : 12;
    static constexpr std::size_t leaf_classes = std::size_t{1} << leaf_bits;
    static constexpr std::size_t leaves = std::size_t{1} << (Bits - leaf_bits);
    using leaf_bitmap = detail::bitmap_tree<leaf_classes>;
    using top_bitmap = detail::bitmap_tree<leaves>;

    struct leaf {
        leaf* mapped_before;   // every mapped leaf, for the destructor (not the 2^19 slots)
        std::uint64_t bits[leaf_bitmap::storage_words];
        detail::header_slot<Header> headers[leaf_classes];
    };

public:
    static constexpr std::size_t classes = std::size_t{1} << Bits;

    sparse_index() = default;
    sparse_index(const sparse_index&) = delete;
    sparse_index& operator=(const sparse_index&) = delete;
    ~sparse_index() {
        while (mapped_) {
            leaf* lf = mapped_;
            mapped_ = lf->mapped_before;
            ::munmap(lf, sizeof(leaf));
        }
    }

    // Forced inline: it is a lookup on Velox's allocation and free paths,
    // where g++ left it out of line once the malloc's free grew.
    [[gnu::always_inline]] Header* find(std::size_t i) noexcept {
        leaf* lf = leaf_at(i >> leaf_bits);
        return lf && leaf_bitmap(lf->bits).test(i & (leaf_classes - 1)) ? slot(lf, i) : nullptr;
    }
    bool contains(std::size_t i) const noexcept { return const_cast<sparse_index*>(this)->find(i) != nullptr; }

    // Maps the leaves for classes [lo, hi]; false when the system refuses.
    bool prepare(std::size_t lo, std::size_t hi) noexcept {
        for (std::size_t l = lo >> leaf_bits; l <= (hi >> leaf_bits); ++l) {
            if (!leaf_of_[l]) {
                void* p = ::mmap(nullptr, sizeof(leaf), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (p == MAP_FAILED) return false;
                leaf_of_[l] = static_cast<leaf*>(p);
                leaf_of_[l]->mapped_before = mapped_;
                mapped_ = leaf_of_[l];
                ++leaf_count_;
            }
            remember(l);
        }
        return true;
    }

    // Precondition: prepare() covered i.
    Header& obtain(std::size_t i) noexcept {
        leaf* lf = leaf_at(i >> leaf_bits);
        if (!leaf_bitmap(lf->bits).test(i & (leaf_classes - 1))) [[unlikely]] return open(lf, i);
        return *slot(lf, i);
    }
    void release(std::size_t i) noexcept {
        leaf* lf = leaf_at(i >> leaf_bits);
        leaf_bitmap b(lf->bits);
        b.reset(i & (leaf_classes - 1));
        if (b.empty()) top().reset(i >> leaf_bits);
    }
    std::size_t first() const noexcept { return next_from(0); }
    std::size_t next(std::size_t i) const noexcept { return next_from(i + 1); }
    std::size_t metadata_bytes() const noexcept { return leaf_count_ * sizeof(leaf); }

private:
    // The leaf that refills prepared last, kept beside the table: a heap's
    // chunks sit in one leaf or a few (one leaf spans 2^12 classes, 256 MiB
    // of Velox's vicinities), and reaching it through leaf_of_ costs every
    // lookup two dependent loads (the mapped array's base, then the slot)
    // on the allocation and free paths; this costs one compare.
    [[gnu::always_inline]] leaf* leaf_at(std::size_t l) const noexcept {
        if (l == near_number_) [[likely]] return near_;
        return leaf_of_[l];
    }
    void remember(std::size_t l) noexcept {
        near_number_ = l;
        near_ = leaf_of_[l];
    }
    // A class becoming non-empty: out of line, so that a free into a live
    // class (the common case) stays a bit test.
    [[gnu::noinline]] Header& open(leaf* lf, std::size_t i) noexcept {
        Init{}(*slot(lf, i));
        leaf_bitmap(lf->bits).set(i & (leaf_classes - 1));
        top().set(i >> leaf_bits);
        return *slot(lf, i);
    }
    std::size_t next_from(std::size_t i) const noexcept {
        auto* self = const_cast<sparse_index*>(this);
        if (i >= classes) return npos;
        std::size_t l = i >> leaf_bits;
        if (leaf* lf = leaf_at(l)) {
            const std::size_t j = leaf_bitmap(lf->bits).find_next(i & (leaf_classes - 1));
            if (j != npos) return (l << leaf_bits) | j;
        }
        l = self->top().find_next(l + 1);
        if (l == npos) return npos;
        return (l << leaf_bits) | leaf_bitmap(leaf_of_[l]->bits).find_next(0);
    }
    top_bitmap top() noexcept { return top_bitmap(top_bits_.data()); }
    static Header* slot(leaf* lf, std::size_t i) noexcept {
        return std::launder(reinterpret_cast<Header*>(&lf->headers[i & (leaf_classes - 1)]));
    }

    detail::mapped_array<leaf*> leaf_of_{leaves};
    detail::mapped_array<std::uint64_t> top_bits_{top_bitmap::storage_words};
    std::size_t leaf_count_ = 0;
    leaf* mapped_ = nullptr;
    std::size_t near_number_ = leaves;   // none yet: no leaf has this number
    leaf* near_ = nullptr;
};

} // namespace allotheque
