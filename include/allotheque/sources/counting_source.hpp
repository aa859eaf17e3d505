// A source wrapper that counts what the heap holds from the system: bytes now,
// the high-water mark and the calls. Tests use it to prove that a heap gives
// everything back; the benchmarks use it for the memory columns.
#pragma once
#include <cstddef>

#include <allotheque/sources/source.hpp>

namespace allotheque {

template <source Upstream>
class counting_source {
public:
    static constexpr bool zeroed = source_zeroed<Upstream>;

    counting_source() = default;
    explicit counting_source(Upstream up) : up_(static_cast<Upstream&&>(up)) {}

    void* allocate(std::size_t n, const void* near) noexcept {
        void* p = up_.allocate(n, near);
        if (p) {
            ++allocations_;
            bytes_ += n;
            if (bytes_ > peak_) peak_ = bytes_;
        } else {
            ++refusals_;
        }
        return p;
    }
    void deallocate(void* p, std::size_t n) noexcept {
        ++deallocations_;
        bytes_ -= n;
        up_.deallocate(p, n);
    }

    // Decommitted pages stay counted: the range is still held from the source.
    bool decommit(void* p, std::size_t n) noexcept
        requires decommitting_source<Upstream>
    {
        ++decommits_;
        return up_.decommit(p, n);
    }

    bool extend(void* p, std::size_t n, std::size_t more) noexcept
        requires extending_source<Upstream>
    {
        if (!up_.extend(p, n, more)) return false;
        ++extensions_;
        bytes_ += more;
        if (bytes_ > peak_) peak_ = bytes_;
        return true;
    }

    void* allocate_apart(std::size_t n) noexcept
        requires moving_source<Upstream>
    {
        void* p = up_.allocate_apart(n);
        if (!p) {
            ++refusals_;
            return nullptr;
        }
        ++allocations_;
        bytes_ += n;
        if (bytes_ > peak_) peak_ = bytes_;
        return p;
    }
    bool move(void* from, std::size_t n, void* to, std::size_t m) noexcept
        requires moving_source<Upstream>
    {
        const bool moved = up_.move(from, n, to, m);
        ++deallocations_;   // `from` is taken back, or else `to`
        bytes_ -= moved ? n : m;
        return moved;
    }

    std::size_t bytes() const noexcept { return bytes_; }
    std::size_t peak_bytes() const noexcept { return peak_; }
    std::size_t allocations() const noexcept { return allocations_; }
    std::size_t deallocations() const noexcept { return deallocations_; }
    std::size_t refusals() const noexcept { return refusals_; }
    std::size_t decommits() const noexcept { return decommits_; }
    std::size_t extensions() const noexcept { return extensions_; }
    Upstream& upstream() noexcept { return up_; }

private:
    [[no_unique_address]] Upstream up_{};
    std::size_t bytes_ = 0, peak_ = 0, allocations_ = 0, deallocations_ = 0, refusals_ = 0, decommits_ = 0, extensions_ = 0;
};

} // namespace allotheque
