// libFuzzer target: decodes the input into a sequence of heap operations and
// runs them against one allotheque heap and against a reference model (the set
// of live blocks). Any disagreement with the documented contract of heap<>
// (include/allotheque/heap.hpp) aborts with a message.
//
// Input format (see fuzz/make_corpus.py, which writes the seed corpus):
//   byte 0          heap index into ALLOTHEQUE_FUZZ_HEAPS (modulo the count);
//                   ignored (but consumed) by a per-heap binary built with
//                   -DFUZZ_HEAP=<index>, so every binary reads every corpus.
//   then operations, each an opcode byte (low 4 bits) followed by operands;
//   a read past the end yields zeros, so every input decodes.
//     0..6   allocate          size, alignment, hint
//     7..10  deallocate        index (into the live blocks, in address order)
//     11,12  reallocate        index, size, alignment
//     13     verify all blocks and the heap's statistics
//     14     run               count, size, alignment: allocate count blocks of
//                              one request, free them with deallocate_run
//     15     deallocate_all    if the next byte is < 16, else free a few blocks
//   size:  class byte (low 3 bits) + up to 2 bytes, see decode_size
//   align: one byte, see decode_alignment
//   hint:  one byte (+ operands), see decode_hint
//
// The heaps draw from counting_source<ledger_source<mmap_source>>: the counting
// source is what the heap's statistics are checked against while it lives, the
// ledger outlives the heap and proves that destruction returns every byte, and
// that each range given back is exactly a range that was taken.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <new>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <allotheque/allocators/defero.hpp>
#include <allotheque/allocators/kingsley.hpp>
#include <allotheque/allocators/kingsley_coalescing.hpp>
#include <allotheque/allocators/lea.hpp>
#include <allotheque/allocators/medius.hpp>
#include <allotheque/allocators/quickfit.hpp>
#include <allotheque/allocators/velox.hpp>
#include <allotheque/block_heap.hpp>
#include <allotheque/heap.hpp>
#include <allotheque/sources/counting_source.hpp>
#include <allotheque/sources/mmap_source.hpp>

namespace {

[[noreturn]] void fail(const char* heap, const char* what, const void* p = nullptr, std::size_t a = 0,
                       std::size_t b = 0) {
    std::fprintf(stderr, "heap_fuzzer[%s]: %s (p=%p, %zu, %zu)\n", heap, what, p, a, b);
    std::fflush(stderr);
    std::abort();
}

// Every range the heaps hold from the system, outside any heap.
struct ledger {
    std::map<std::uintptr_t, std::size_t> ranges;
    std::size_t bytes = 0;
};
ledger g_ledger;
const char* g_heap_name = "?";

template <allotheque::source Up>
struct ledger_source {
    Up up{};
    void* allocate(std::size_t n, const void* near) noexcept {
        if (n == 0 || n % allotheque::detail::page_size != 0) fail(g_heap_name, "source asked for a non-page multiple", near, n);
        void* p = up.allocate(n, near);
        if (p) {
            const auto a = reinterpret_cast<std::uintptr_t>(p);
            if (a % allotheque::detail::page_size != 0) fail(g_heap_name, "source returned an unaligned range", p, n);
            g_ledger.ranges.emplace(a, n);
            g_ledger.bytes += n;
        }
        return p;
    }
    void deallocate(void* p, std::size_t n) noexcept {
        auto it = g_ledger.ranges.find(reinterpret_cast<std::uintptr_t>(p));
        if (it == g_ledger.ranges.end()) fail(g_heap_name, "heap gave back a range it never took", p, n);
        if (it->second != n) fail(g_heap_name, "heap gave back a range with the wrong length", p, n, it->second);
        g_ledger.ranges.erase(it);
        g_ledger.bytes -= n;
        up.deallocate(p, n);
    }
};

using fuzz_source = allotheque::counting_source<ledger_source<allotheque::mmap_source>>;

} // namespace

// The heaps under test, one line each: X(name, heap type). fuzz/CMakeLists.txt
// reads the names from these lines and builds heap_fuzzer_<name> for each
// (with -DFUZZ_HEAP=<its index>), so adding a line here is all a new heap needs.
#define ALLOTHEQUE_FUZZ_HEAPS(X)                        \
    X(kingsley, allotheque::kingsley_heap<fuzz_source>) \
    X(quickfit, allotheque::quickfit_heap<fuzz_source>) \
    X(velox, allotheque::velox_heap<fuzz_source>)       \
    X(medius, allotheque::medius_heap<fuzz_source>)     \
    X(velox_classed, allotheque::heap<allotheque::velox_classed_partition<>, fuzz_source, allotheque::velox_heap_options>) \
    X(medius_classed, allotheque::heap<allotheque::medius_classed_partition<>, fuzz_source, allotheque::medius_heap_options>) \
    X(defero, allotheque::defero_heap<fuzz_source>)     \
    X(lea, allotheque::lea_heap<fuzz_source>)           \
    X(lea_deferred, allotheque::lea_deferred_heap<fuzz_source>) \
    X(kingsley_coalescing, allotheque::kingsley_coalescing_heap<fuzz_source>)

namespace {

#define X(name, ...) +1
constexpr std::size_t heap_count = 0 ALLOTHEQUE_FUZZ_HEAPS(X);
#undef X

constexpr std::size_t max_live = 512;          // blocks kept live at once
constexpr std::size_t max_live_bytes = 16u << 20;   // and their total size

// Reads the input front to back; past the end every read is 0.
struct reader {
    const std::uint8_t* p;
    std::size_t n;
    bool empty() const { return n == 0; }
    std::uint8_t u8() {
        if (n == 0) return 0;
        --n;
        return *p++;
    }
    std::uint16_t u16() { return static_cast<std::uint16_t>(u8() | (u8() << 8)); }
    std::uint64_t u48() {
        std::uint64_t v = 0;
        for (int i = 0; i < 6; ++i) v |= std::uint64_t{u8()} << (8 * i);
        return v;
    }
};

std::uint64_t mix(std::uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

// The pattern loops touch every word of every block: keep them out of the
// coverage instrumentation (they give no feedback, only cost), and out of
// line: inlined into an instrumented caller they would be instrumented again.
#if defined(__clang__) && __clang_major__ >= 13
#define FUZZ_NO_COVERAGE __attribute__((no_sanitize("coverage")))
#else
#define FUZZ_NO_COVERAGE
#endif

// Block contents: word i of a block with seed s is mix(s) + i * odd constant.
// The fuzzer claims each block's whole good_size, past the size asked for,
// which a memory checker keeps shut (detail/poison.hpp): it is opened first.
[[gnu::noinline]] FUZZ_NO_COVERAGE void fill(void* p, std::size_t bytes, std::uint64_t seed) {
    allotheque::detail::poison::expose(p, bytes);
    auto* w = static_cast<std::uint64_t*>(p);
    const std::uint64_t base = mix(seed);
    for (std::size_t i = 0; i < bytes / 8; ++i) w[i] = base + i * 0x9e3779b97f4a7c15ULL;
}
// Index of the first bad word in [0, bytes), or npos.
[[gnu::noinline]] FUZZ_NO_COVERAGE std::size_t check(const void* p, std::size_t bytes, std::uint64_t seed) {
    const auto* w = static_cast<const std::uint64_t*>(p);
    const std::uint64_t base = mix(seed);
    for (std::size_t i = 0; i < bytes / 8; ++i)
        if (w[i] != base + i * 0x9e3779b97f4a7c15ULL) return i;
    return static_cast<std::size_t>(-1);
}

std::size_t decode_size(reader& in) {
    const std::uint8_t c = in.u8();
    switch (c & 7) {
    case 0: return 0;
    case 1: return in.u8() & 63;                                   // tiny
    case 2: return in.u16() & 1023;                                // small
    case 3: return in.u16() & 16383;                               // up to 16 KiB
    case 4: {                                                      // around page multiples
        const std::size_t k = 1 + (in.u8() & 15);
        return k * 4096 + static_cast<std::size_t>(static_cast<int>(in.u8() & 31) - 16);
    }
    case 5: return 65536 + static_cast<std::size_t>(static_cast<int>(in.u8()) - 128);   // the large threshold
    case 6: return 65536 + std::size_t{in.u16()} * 4;             // large: up to 320 KiB
    default: {                                                     // edges
        static constexpr std::size_t edges[] = {
            1, 7, 8, 9, 15, 16, 17, 127, 128, 129, 255, 256, 257, 4095, 4096, 4097, 8191, 8192, 65535,
            std::numeric_limits<std::ptrdiff_t>::max() / 2,       // heap::max_size: valid, but no system has it
            std::numeric_limits<std::ptrdiff_t>::max() / 2 + 1,    // one past: invalid
            std::numeric_limits<std::size_t>::max() - 4095,        // rounding overflows
            std::numeric_limits<std::size_t>::max(),
        };
        return edges[(c >> 3) % std::size(edges)];
    }
    }
}

std::size_t decode_alignment(reader& in) {
    const std::uint8_t c = in.u8();
    switch (c & 7) {
    case 0: case 1: return 0;
    case 2: return 8;
    case 3: return 16;
    case 4: return 64;
    case 5: return 4096;
    case 6: return 8192;   // above the page: a large block of its own
    default: {
        static constexpr std::size_t others[] = {1, 2, 4, 32, 128, 256, 512, 1024, 2048, 1u << 20,   // valid
                                                 3, 24, 48, 100, 4095, std::size_t{1} << 31,
                                                 std::size_t{1} << 63};                              // invalid
        return others[(c >> 3) % std::size(others)];
    }
    }
}

struct block {
    std::size_t size;        // as requested
    std::size_t alignment;   // as requested
    std::size_t good;        // good_size(size, alignment): the usable extent
    std::uint64_t seed;
    bool large;              // served on its own from the source
};

// block_heap (boundary tags: lea, lea_deferred, kingsley_coalescing) documents
// a weaker contract than heap<>: payloads aligned to 16 bytes (or the requested
// alignment), good_size not rounded to it; large = aligned beyond 16 bytes or
// above the large threshold (default heap_options); usable_size(p) >= good
// size; no deallocate_run.
template <class Heap>
constexpr bool is_block_heap = allotheque::block_partition<typename Heap::partition_type>;

template <class Heap>
class harness {
public:
    explicit harness(const char* name) : name_(name) {}

    void run(reader& in) {
        while (!in.empty()) {
            const std::uint8_t op = in.u8() & 15;
            if (op <= 6) do_allocate(in);
            else if (op <= 10) do_deallocate(in.u8());
            else if (op <= 12) do_reallocate(in);
            else if (op == 13) verify_all();
            else if (op == 14) do_run(in);
            else if (in.u8() < 16) do_deallocate_all();
            else for (int i = 0; i < 4; ++i) do_deallocate(in.u8());
            ++ops_;
            if (ops_ % 64 == 0) verify_all();
        }
        verify_all();
        while (!live_.empty()) free_block(live_.begin());
        check_stats();
        // Memory goes back to the system only at destruction (or deallocate_all).
        if (heap_->source().bytes() != g_ledger.bytes) fail(name_, "counting source and ledger disagree");
        heap_.reset();
        if (g_ledger.bytes != 0 || !g_ledger.ranges.empty())
            fail(name_, "destroyed heap did not return every byte", nullptr, g_ledger.bytes, g_ledger.ranges.size());
    }

private:
    using map = std::map<std::uintptr_t, block>;

    static bool is_large(std::size_t size, std::size_t alignment, std::size_t good) {
        // Large: above the threshold, or aligned beyond a page (a span of its own).
        if constexpr (is_block_heap<Heap>)
            return alignment > Heap::max_alignment || size > allotheque::heap_options<>::large_threshold;
        else
            return Heap::is_large(good, alignment);
    }

    static bool valid(std::size_t size, std::size_t alignment) {
        // Powers of two up to max_large_alignment (1 GiB): beyond a page, a large block.
        if (alignment != 0 && (!allotheque::detail::is_pow2(alignment) || alignment > Heap::max_large_alignment))
            return false;
        return size <= Heap::max_size;
    }
    // Valid requests the system cannot satisfy (mmap of ~2^62 bytes).
    static bool unsatisfiable(std::size_t size) { return size > (std::size_t{1} << 40); }

    static std::size_t expected_alignment(std::size_t alignment, std::size_t good) {
        if constexpr (is_block_heap<Heap>) return std::max<std::size_t>(alignment, 16);
        if (alignment != 0) return alignment;
        const std::size_t natural = allotheque::detail::natural_alignment(good);
        return std::max<std::size_t>(natural, 8);
    }

    const void* decode_hint(reader& in) {
        const std::uint8_t c = in.u8();
        switch (c & 3) {
        case 0: return nullptr;
        case 1: {   // a live block
            if (live_.empty()) return nullptr;
            return reinterpret_cast<const void*>(nth(in.u8())->first);
        }
        case 2:     // anywhere in the 47-bit user space (or just above it)
            return reinterpret_cast<const void*>(static_cast<std::uintptr_t>(in.u48()) << (c >> 6));
        default: {  // near something: inside or just past a live block, or the last allocation
            if (live_.empty() || (c & 4)) return heap_->last_allocation();
            auto it = nth(in.u8());
            const auto off = static_cast<std::uintptr_t>(in.u16()) * 8;
            return reinterpret_cast<const void*>(it->first + off);
        }
        }
    }

    map::iterator nth(std::uint8_t i) {
        auto it = live_.begin();
        std::advance(it, i % live_.size());
        return it;
    }

    // Allocates, checks everything a new block promises, fills it and records it.
    // Returns the block's address or 0.
    std::uintptr_t allocate_one(std::size_t size, std::size_t alignment, const void* hint, bool use_throwing) {
        const bool ok = valid(size, alignment);
        const std::size_t good = Heap::good_size(size, alignment);
        if (ok != (good != 0)) fail(name_, "good_size disagrees with the documented validity", nullptr, size, alignment);
        if (ok) {
            if (good < size || good % 8 != 0) fail(name_, "good_size too small or not a multiple of 8", nullptr, size, good);
            if (alignment != 0 && good % alignment != 0 && !is_large(size, alignment, good) && !is_block_heap<Heap>)
                fail(name_, "good_size not a multiple of the alignment", nullptr, good, alignment);
        }
        const bool room = live_.size() < max_live && live_bytes_ + (ok ? good : 0) <= max_live_bytes;
        if (ok && (!room || unsatisfiable(size))) {
            if (!unsatisfiable(size)) return 0;   // keep the model small: do not allocate
            if (heap_->try_allocate(allotheque::request{size, hint, alignment}) != nullptr)
                fail(name_, "a 2^62-byte request succeeded", nullptr, size);
            check_stats();
            return 0;
        }
        void* p = nullptr;
        if (use_throwing) {
            bool threw = false;
            try {
                p = heap_->allocate(allotheque::request{size, hint, alignment});
            } catch (const std::bad_alloc&) {
                threw = true;
            }
            if (threw != !ok) fail(name_, ok ? "allocate threw on a valid request" : "allocate did not throw on an invalid request", p, size, alignment);
        } else {
            p = heap_->try_allocate(allotheque::request{size, hint, alignment});
        }
        if (!ok) {
            if (p) fail(name_, "invalid request was served", p, size, alignment);
            return 0;
        }
        if (!p) fail(name_, "valid request returned nullptr", nullptr, size, alignment);
        const auto a = reinterpret_cast<std::uintptr_t>(p);
        const std::size_t want = expected_alignment(alignment, good);
        if (a % want != 0) fail(name_, "block misaligned", p, want, size);
        // No overlap with the live neighbours.
        auto next = live_.lower_bound(a);
        if (next != live_.end() && next->first < a + good)
            fail(name_, "block overlaps the next live block", p, good, next->first);
        if (next != live_.begin()) {
            auto prev = std::prev(next);
            if (prev->first + prev->second.good > a) fail(name_, "block overlaps the previous live block", p, prev->first, prev->second.good);
        }
        const std::uint64_t seed = ++seed_;
        fill(p, good, seed);
        if constexpr (is_block_heap<Heap>)
            if (Heap::usable_size(p) < good) fail(name_, "usable_size below good_size", p, Heap::usable_size(p), good);
        live_.emplace(a, block{size, alignment, good, seed, is_large(size, alignment, good)});
        live_bytes_ += good;
        check_stats_cheap();
        return a;
    }

    void do_allocate(reader& in) {
        const std::size_t size = decode_size(in);
        const std::size_t alignment = decode_alignment(in);
        const void* hint = decode_hint(in);
        allocate_one(size, alignment, hint, (ops_ & 7) == 3);
    }

    void verify(map::const_iterator it) const {
        const std::size_t bad = check(reinterpret_cast<const void*>(it->first), it->second.good, it->second.seed);
        if (bad != static_cast<std::size_t>(-1))
            fail(name_, "block contents changed while live (word index, size)", reinterpret_cast<const void*>(it->first), bad,
                 it->second.size);
    }

    void free_block(map::iterator it) {
        verify(it);
        const block b = it->second;
        void* p = reinterpret_cast<void*>(it->first);
        live_.erase(it);
        live_bytes_ -= b.good;
        // Scribble over it: a heap that hands it out again must not care.
        std::memset(p, 0xdb, std::min<std::size_t>(b.good, 4096));
        if constexpr (is_block_heap<Heap>) {
            if (b.seed & 1) heap_->deallocate(p);   // block heaps: half malloc-style, without a size
            else heap_->deallocate(p, allotheque::request{b.size, nullptr, b.alignment});
        } else {
            heap_->deallocate(p, allotheque::request{b.size, nullptr, b.alignment});
        }
        check_stats_cheap();
    }

    void do_deallocate(std::uint8_t i) {
        if (!live_.empty()) free_block(nth(i));
    }

    void do_reallocate(reader& in) {
        const std::uint8_t i = in.u8();
        const std::size_t size = decode_size(in);
        const std::size_t alignment = decode_alignment(in);
        if (live_.empty()) return;
        auto old = nth(i);
        verify(old);
        const std::uintptr_t from = old->first;
        const block ob = old->second;
        const std::uintptr_t to = allocate_one(size, alignment, reinterpret_cast<const void*>(from), false);
        if (to == 0) return;
        auto nb = live_.find(to);
        const std::size_t n = std::min(ob.good, nb->second.good);
        std::memcpy(reinterpret_cast<void*>(to), reinterpret_cast<const void*>(from), n);
        if (check(reinterpret_cast<const void*>(to), n, ob.seed) != static_cast<std::size_t>(-1))
            fail(name_, "reallocate: the copy differs", reinterpret_cast<void*>(to), n);
        free_block(live_.find(from));
        // Freeing the old block must not touch the new one.
        if (check(reinterpret_cast<const void*>(to), n, ob.seed) != static_cast<std::size_t>(-1))
            fail(name_, "reallocate: freeing the old block changed the new one", reinterpret_cast<void*>(to), n);
        nb = live_.find(to);
        fill(reinterpret_cast<void*>(to), nb->second.good, nb->second.seed);
    }

    void do_run(reader& in) {
        const std::size_t count = 1 + (in.u8() & 15);
        const std::size_t size = decode_size(in);
        const std::size_t alignment = decode_alignment(in);
        std::vector<void*> ps;
        for (std::size_t k = 0; k < count; ++k) {
            const std::uintptr_t a = allocate_one(size, alignment, ps.empty() ? nullptr : ps.back(), false);
            if (a == 0) break;
            ps.push_back(reinterpret_cast<void*>(a));
            if (k % 3 == 1) ps.push_back(nullptr);   // deallocate_run skips nulls
        }
        if (ps.empty()) return;
        for (void* p : ps) {
            if (!p) continue;
            auto it = live_.find(reinterpret_cast<std::uintptr_t>(p));
            verify(it);
            live_bytes_ -= it->second.good;
            live_.erase(it);
        }
        if constexpr (is_block_heap<Heap>) {
            for (void* p : ps)
                if (p) heap_->deallocate(p);   // no deallocate_run: malloc-style frees instead
        } else {
            heap_->deallocate_run(ps.data(), ps.size(), allotheque::request{size, nullptr, alignment});
        }
        check_stats_cheap();
    }

    void do_deallocate_all() {
        verify_all();
        heap_->deallocate_all();
        live_.clear();
        live_bytes_ = 0;
        const auto st = heap_->stats();
        if (heap_->source().bytes() != 0 || st.os_bytes != 0 || st.large_blocks != 0 || g_ledger.bytes != 0)
            fail(name_, "deallocate_all kept system memory", nullptr, heap_->source().bytes(), st.large_blocks);
    }

    void check_stats_cheap() {
        if (heap_->source().bytes() != heap_->stats().os_bytes)
            fail(name_, "stats().os_bytes differs from the source's count", nullptr, heap_->stats().os_bytes,
                 heap_->source().bytes());
    }
    void check_stats() {
        check_stats_cheap();
        const auto st = heap_->stats();
        std::size_t large = 0;
        for (const auto& [a, b] : live_) large += b.large ? 1 : 0;
        if (st.large_blocks != large) fail(name_, "stats().large_blocks differs from the live large blocks", nullptr, st.large_blocks, large);
        if (st.peak_os_bytes < st.os_bytes) fail(name_, "peak below current", nullptr, st.peak_os_bytes, st.os_bytes);
        if (g_ledger.bytes != heap_->source().bytes()) fail(name_, "counting source and ledger disagree");
    }
    void verify_all() {
        for (auto it = live_.begin(); it != live_.end(); ++it) verify(it);
        check_stats();
    }

    const char* name_;
    std::optional<Heap> heap_{std::in_place};
    map live_;
    std::size_t live_bytes_ = 0;
    std::uint64_t seed_ = 0;
    std::uint64_t ops_ = 0;
};

template <class Heap>
void run_one(const char* name, reader& in) {
    g_heap_name = name;
    if (g_ledger.bytes != 0) fail(name, "ledger not empty before the run");
    harness<Heap>(name).run(in);
}

#define X(name, ...) std::type_identity<__VA_ARGS__>,
using heap_types = std::tuple<ALLOTHEQUE_FUZZ_HEAPS(X) void>;
#undef X
#define X(name, ...) #name,
constexpr const char* heap_names[] = {ALLOTHEQUE_FUZZ_HEAPS(X)};
#undef X

template <std::size_t I>
void run_index(reader& in) {
    using H = typename std::tuple_element_t<I, heap_types>::type;
    run_one<H>(heap_names[I], in);
}
template <std::size_t... I>
[[maybe_unused]] void dispatch(std::size_t which, reader& in, std::index_sequence<I...>) {
    ((which == I ? run_index<I>(in) : void()), ...);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    reader in{data, size};
    const std::size_t which = in.u8() % heap_count;
#ifdef FUZZ_HEAP
    static_assert(FUZZ_HEAP >= 0 && FUZZ_HEAP < heap_count, "FUZZ_HEAP out of range");
    (void)which;
    run_index<FUZZ_HEAP>(in);   // only this heap is instantiated
#else
    dispatch(which, in, std::make_index_sequence<heap_count>{});
#endif
    return 0;
}
