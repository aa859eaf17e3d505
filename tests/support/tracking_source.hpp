// Test-only source: mmap memory, every range recorded in a ledger that outlives
// the heap (so a test can check after destruction that everything came back),
// and an optional byte limit beyond which the source refuses.
#pragma once
#include <allotheque/backend/record_pool.hpp>
#include <allotheque/backend/span.hpp>
#include <allotheque/sources/mmap_source.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <stdexcept>

namespace allotheque_test {

// A heap's first allocation from its source is a slab of span records (the back
// end's metadata, backend/record_pool.hpp); limits in tests leave room for it.
inline constexpr std::size_t record_slab = allotheque::backend::record_pool<allotheque::backend::span>::slab_bytes;

struct source_ledger {
    std::size_t bytes = 0, peak = 0, allocations = 0, deallocations = 0, refusals = 0;
    std::size_t limit = std::numeric_limits<std::size_t>::max();   // refuse beyond this many bytes held
    std::size_t bad_deallocations = 0;   // ranges given back that were never handed out (or wrong size)
    std::map<std::uintptr_t, std::size_t> live;

    bool balanced() const noexcept {
        return bytes == 0 && live.empty() && allocations == deallocations && bad_deallocations == 0;
    }
};

inline source_ledger& default_ledger() {
    static source_ledger l;
    return l;
}

struct tracking_source {
    source_ledger* ledger = &default_ledger();

    tracking_source() = default;
    explicit tracking_source(source_ledger& l) noexcept : ledger(&l) {}

    void* allocate(std::size_t n, const void* near) noexcept {
        if (n > ledger->limit || ledger->bytes > ledger->limit - n) {
            ++ledger->refusals;
            return nullptr;
        }
        void* p = allotheque::mmap_source{}.allocate(n, near);
        if (!p) {
            ++ledger->refusals;
            return nullptr;
        }
        ++ledger->allocations;
        ledger->bytes += n;
        if (ledger->bytes > ledger->peak) ledger->peak = ledger->bytes;
        ledger->live.emplace(reinterpret_cast<std::uintptr_t>(p), n);
        return p;
    }
    void deallocate(void* p, std::size_t n) noexcept {
        auto it = ledger->live.find(reinterpret_cast<std::uintptr_t>(p));
        if (it == ledger->live.end() || it->second != n) {
            ++ledger->bad_deallocations;
            return;   // do not unmap what we do not know
        }
        ledger->live.erase(it);
        ++ledger->deallocations;
        ledger->bytes -= n;
        allotheque::mmap_source{}.deallocate(p, n);
    }
};

} // namespace allotheque_test
