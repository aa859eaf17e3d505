// `stats<H, Flags>` (class stats_collector): counts what passes through it, like
// D's StatsCollector, configured by a bitmask of what to collect:
//   count_calls      allocations, deallocations, failed_allocations
//   live_bytes       bytes requested and not yet freed (the sizes callers asked for)
//   peak_live_bytes  high-water mark of live bytes (implies live_bytes)
//   os_bytes         os_bytes / peak_os_bytes read from the parent's stats() when
//                    it reports them (ignored otherwise)
//   histogram        request sizes in power-of-two buckets: bucket k counts sizes in
//                    (2^(k-1), 2^k], bucket 0 sizes 0 and 1
// A counter not selected has no storage and no code: stats<H, stats_flags::none>
// has the size of H and forwards straight through.
//
// fragmentation() = (peak_os_bytes - peak_live_bytes) / peak_live_bytes: both
// internal (rounding to good_size, headers) and external waste, against what the
// program asked for (needs peak_live_bytes and os_bytes).
//
// to_json() returns one object with the collected fields only:
//   {"allocations":N,"deallocations":N,"failed_allocations":N,
//    "live_bytes":N,"peak_live_bytes":N,"os_bytes":N,"peak_os_bytes":N,
//    "fragmentation":X|null,"histogram":[{"upto":2^k,"count":N},...]}
// (histogram lists non-empty buckets only; fragmentation is null while nothing
// has been allocated).
//
// Thread safety: none of its own (plain counters), like the heap below it. Put a
// lock outside (locked<stats<H>>) for a shared heap, or inside per_thread
// (per_thread<stats<H>>) for per-thread figures. stats<locked<H>> used from
// several threads races on the counters.
// Cost: a few additions per call for the selected counters.
#pragma once
#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <new>
#include <string>
#include <type_traits>
#include <utility>

#include <allotheque/layers/heap_concept.hpp>
#include <allotheque/layers/layer.hpp>
#include <allotheque/request.hpp>

namespace allotheque::layers {

struct stats_flags {
    static constexpr unsigned none = 0;
    static constexpr unsigned count_calls = 1u << 0;
    static constexpr unsigned live_bytes = 1u << 1;
    static constexpr unsigned peak_live_bytes = 1u << 2;
    static constexpr unsigned os_bytes = 1u << 3;
    static constexpr unsigned histogram = 1u << 4;
    static constexpr unsigned all = count_calls | live_bytes | peak_live_bytes | os_bytes | histogram;
};

// What stats() returns. Fields not collected stay 0.
struct stats_report {
    std::size_t allocations = 0, deallocations = 0, failed_allocations = 0;
    std::size_t live_bytes = 0, peak_live_bytes = 0;
    std::size_t os_bytes = 0, peak_os_bytes = 0;   // from the parent's stats()
    double fragmentation = 0;                      // see fragmentation(); 0 when undefined
};

namespace detail_stats {
struct no_calls {};
struct calls {
    std::size_t allocations = 0, deallocations = 0, failed = 0;
};
struct no_live {};
struct live {
    std::size_t bytes = 0, peak = 0;
};
struct no_histogram {};
struct histogram {
    std::array<std::size_t, 65> buckets{};
};
inline constexpr unsigned bucket_of(std::size_t n) noexcept {
    return n <= 1 ? 0u : static_cast<unsigned>(std::bit_width(n - 1));
}
} // namespace detail_stats

template <class H, unsigned Flags = stats_flags::all>
class stats_collector : public layer<stats_collector<H, Flags>, H> {
    using base = layer<stats_collector<H, Flags>, H>;
    using base::parent_;
    static_assert((Flags & ~stats_flags::all) == 0, "allotheque::layers::stats: unknown flag");

    static constexpr bool k_calls = (Flags & stats_flags::count_calls) != 0;
    static constexpr bool k_peak = (Flags & stats_flags::peak_live_bytes) != 0;
    static constexpr bool k_live = k_peak || (Flags & stats_flags::live_bytes) != 0;
    static constexpr bool k_hist = (Flags & stats_flags::histogram) != 0;
    static constexpr bool k_os = (Flags & stats_flags::os_bytes) != 0 && requires(const H& h) {
        { h.stats().os_bytes } -> std::convertible_to<std::size_t>;
        { h.stats().peak_os_bytes } -> std::convertible_to<std::size_t>;
    };

public:
    static constexpr unsigned flags = Flags;
    using base::base;

    template <request_like R = request>
    [[nodiscard]] void* try_allocate(const R& r) noexcept {
        void* p = parent_.try_allocate(r);
        if (!p) {
            if constexpr (k_calls) ++calls_.failed;
            return nullptr;
        }
        on_allocate(r.size);
        return p;
    }
    void deallocate(void* p, const request& r) noexcept {
        if (!p) return;
        on_deallocate(r.size);
        parent_.deallocate(p, r);
    }
    void deallocate_run(void* const* ps, std::size_t n, const request& r) noexcept
        requires has_deallocate_run<H>
    {
        for (std::size_t i = 0; i < n; ++i)
            if (ps[i]) on_deallocate(r.size);
        parent_.deallocate_run(ps, n, r);   // counted above: the parent's run stays one pass
    }
    // Live bytes drop to 0; counts, peaks and the histogram are kept.
    void deallocate_all() noexcept
        requires has_deallocate_all<H>
    {
        if constexpr (k_live) live_.bytes = 0;
        parent_.deallocate_all();
    }
    stats_report stats() const noexcept {
        stats_report s;
        if constexpr (k_calls) {
            s.allocations = calls_.allocations;
            s.deallocations = calls_.deallocations;
            s.failed_allocations = calls_.failed;
        }
        if constexpr (k_live) s.live_bytes = live_.bytes;
        if constexpr (k_peak) s.peak_live_bytes = live_.peak;
        if constexpr (k_os) {
            auto ps = parent_.stats();
            s.os_bytes = ps.os_bytes;
            s.peak_os_bytes = ps.peak_os_bytes;
        }
        if constexpr (k_peak && k_os) s.fragmentation = fragmentation();
        return s;
    }
    // (peak OS bytes - peak live bytes) / peak live bytes; 0 before any allocation.
    double fragmentation() const noexcept
        requires(k_peak && k_os)
    {
        if (live_.peak == 0) return 0;
        const auto os = static_cast<double>(parent_.stats().peak_os_bytes);
        return (os - static_cast<double>(live_.peak)) / static_cast<double>(live_.peak);
    }
    // Requests of size in (2^(k-1), 2^k] (bucket 0: sizes 0 and 1).
    std::size_t histogram_bucket(unsigned k) const noexcept
        requires k_hist
    {
        return k < hist_.buckets.size() ? hist_.buckets[k] : 0;
    }
    static constexpr unsigned bucket_of(std::size_t n) noexcept { return detail_stats::bucket_of(n); }

    std::string to_json() const {
        std::string out = "{";
        bool first = true;
        auto field = [&](const char* name, std::size_t v) {
            out += first ? "\"" : ",\"";
            first = false;
            out += name;
            out += "\":";
            out += std::to_string(v);
        };
        if constexpr (k_calls) {
            field("allocations", calls_.allocations);
            field("deallocations", calls_.deallocations);
            field("failed_allocations", calls_.failed);
        }
        if constexpr (k_live) field("live_bytes", live_.bytes);
        if constexpr (k_peak) field("peak_live_bytes", live_.peak);
        if constexpr (k_os) {
            auto ps = parent_.stats();
            field("os_bytes", ps.os_bytes);
            field("peak_os_bytes", ps.peak_os_bytes);
        }
        if constexpr (k_peak && k_os) {
            out += first ? "\"fragmentation\":" : ",\"fragmentation\":";
            first = false;
            if (live_.peak == 0) {
                out += "null";
            } else {
                char buf[64];
                std::snprintf(buf, sizeof buf, "%.6g", fragmentation());
                out += buf;
            }
        }
        if constexpr (k_hist) {
            out += first ? "\"histogram\":[" : ",\"histogram\":[";
            first = false;
            bool first_bucket = true;
            for (std::size_t k = 0; k < hist_.buckets.size(); ++k) {
                if (hist_.buckets[k] == 0) continue;
                out += first_bucket ? "{\"upto\":" : ",{\"upto\":";
                first_bucket = false;
                // Bucket 64 holds sizes above 2^63: its bound does not fit, print 2^64 as text.
                out += k < 64 ? std::to_string(std::size_t{1} << k) : std::string("18446744073709551616");
                out += ",\"count\":";
                out += std::to_string(hist_.buckets[k]);
                out += "}";
            }
            out += "]";
        }
        out += "}";
        return out;
    }

private:
    void on_allocate(std::size_t n) noexcept {
        if constexpr (k_calls) ++calls_.allocations;
        if constexpr (k_live) live_.bytes += n;
        if constexpr (k_peak) live_.peak = std::max(live_.peak, live_.bytes);
        if constexpr (k_hist) ++hist_.buckets[detail_stats::bucket_of(n)];
    }
    void on_deallocate(std::size_t n) noexcept {
        if constexpr (k_calls) ++calls_.deallocations;
        if constexpr (k_live) live_.bytes -= n;
    }

    [[no_unique_address]] std::conditional_t<k_calls, detail_stats::calls, detail_stats::no_calls> calls_;
    [[no_unique_address]] std::conditional_t<k_live, detail_stats::live, detail_stats::no_live> live_;
    [[no_unique_address]] std::conditional_t<k_hist, detail_stats::histogram, detail_stats::no_histogram> hist_;
};

// The name Heap Layers and D readers expect. (A class named `stats` could not
// have a stats() member, hence the alias.)
template <class H, unsigned Flags = stats_flags::all>
using stats = stats_collector<H, Flags>;

} // namespace allotheque::layers
