// `allotheque-trace summary`: what a trace says about a program's allocations
// (docs/trace.md, "Summarise"). Header-only so tests/test_trace_summary.cpp can
// check the numbers on synthetic traces.
//
//   summary s = summarise(trace, resolve(trace));   // the analysis
//   std::string text = format_text(s, symbols, 10); // the text report
//   html_report(s, symbols)                         // html_report.hpp
//   summary_main(argc, argv, stdout, stderr)        // the whole command
#ifndef ALLOTHEQUE_TOOLS_TRACE_SUMMARY_HPP
#define ALLOTHEQUE_TOOLS_TRACE_SUMMARY_HPP

#include <algorithm>
#include <array>
#include <bit>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <allotheque/trace/objects.hpp>
#include <allotheque/trace/reader.hpp>

#include "symbolize.hpp"

namespace allotheque::tools {

struct summary_options {
    std::size_t max_points = 2000;          // live-memory time series, after downsampling
    std::size_t top_sizes = 20;             // exact sizes kept, most frequent first
    std::size_t site_sizes = 32;            // distinct sizes kept per site
    std::uint64_t short_lived_ns = 1000;    // "short-lived": freed within this many ns ...
    std::uint64_t short_lived_allocs = 16;  // ... or before this many further allocations
};

// One power-of-two size bucket: sizes lo..hi (a single size 0 bucket holds 0).
struct size_bucket {
    std::uint64_t lo = 0, hi = 0;
    std::uint64_t count = 0, bytes = 0;
};

struct size_count {
    std::uint64_t size = 0, count = 0;
};

// A lifetime bucket: [lo, hi) in ns or in allocations; hi = UINT64_MAX for the
// last one. Never-freed objects are counted apart (summary::never_freed).
struct range_bucket {
    std::uint64_t lo = 0, hi = 0;
    std::uint64_t count = 0;
};

struct site_stats {
    std::uint64_t site = 0;      // return address
    std::uint64_t count = 0;     // objects allocated here (successful allocations, realloc results included)
    std::uint64_t bytes = 0;     // bytes requested
    std::uint64_t peak_live_bytes = 0;  // the site's own peak of live bytes
    std::uint64_t min_size = 0, max_size = 0;
    std::uint64_t distinct_sizes = 0;
    std::vector<size_count> sizes;  // most frequent first, at most summary_options::site_sizes
    std::uint64_t freed = 0, never_freed = 0, never_freed_bytes = 0;
    bool has_lifetime = false;   // at least one object was freed
    std::uint64_t median_lifetime_ns = 0;
    std::uint64_t failed = 0;    // allocations from here that returned null
    std::uint32_t ops = 0;       // bit (1 << op) for each operation seen
    double mean_size() const { return count ? double(bytes) / double(count) : 0.0; }
};

struct live_point {
    std::uint64_t time_ns = 0, bytes = 0, objects = 0;
};

struct thread_stats {
    std::uint32_t thread = 0, os_tid = 0;
    std::uint64_t events = 0, allocations = 0, bytes = 0, frees = 0;
};

struct summary {
    // The process and the trace.
    std::string exe;
    std::vector<std::string> args;
    std::uint32_t pid = 0;
    std::uint64_t duration_ns = 0;
    std::uint64_t events = 0;
    bool complete = false;
    std::string truncation;
    std::uint64_t dropped = 0;  // events the tracer could not record (END record)

    // Totals.
    std::array<std::uint64_t, 32> by_op{};  // calls per operation code (failed and free(NULL) included)
    std::uint64_t allocations = 0;          // objects created (successful allocation calls)
    std::uint64_t frees = 0;                // free/delete/delete[] of a non-null pointer
    // The parts of `allocations` and `frees`, per operation code: the reports
    // print these, so that the parts add up to the totals.
    std::array<std::uint64_t, 32> allocations_by_op{}, frees_by_op{};
    std::uint64_t null_frees = 0;
    std::uint64_t reallocs = 0, realloc_from_null = 0, realloc_to_zero = 0, realloc_in_place = 0, realloc_moved = 0;
    std::uint64_t failed = 0;
    std::uint64_t unknown_frees = 0;        // releases of addresses not live in the trace
    std::uint64_t reused_live = 0;          // allocation at an address still live (lost free)
    std::uint64_t mismatched_frees = 0;     // new/delete[], malloc/delete, ...
    std::uint64_t bytes_requested = 0;

    // Peaks and what was left.
    std::uint64_t peak_live_bytes = 0, peak_bytes_time_ns = 0, peak_bytes_event = 0, peak_bytes_objects = 0;
    std::uint64_t peak_live_objects = 0, peak_objects_time_ns = 0, peak_objects_event = 0;
    std::uint64_t never_freed = 0, never_freed_bytes = 0;

    // Sizes.
    std::vector<size_bucket> histogram;     // contiguous power-of-two buckets
    std::vector<size_count> top_sizes;      // most frequent exact sizes
    std::uint64_t small64 = 0, small64_bytes = 0, small256 = 0, small256_bytes = 0;
    std::uint64_t small64_glibc_bytes = 0;  // estimated glibc chunk bytes of the <= 64 B objects

    // Lifetimes of freed objects.
    std::uint64_t freed_objects = 0;
    std::vector<range_bucket> lifetime_ns;      // decades: <100 ns, <1 us, ... >= 10 s
    std::vector<range_bucket> lifetime_allocs;  // allocations in between: 0, 1, 2-3, 4-7, ...
    std::uint64_t median_lifetime_ns = 0, median_lifetime_allocs = 0;
    std::uint64_t short_lived_ns_count = 0, short_lived_allocs_count = 0;
    std::uint64_t short_lived_ns = 0, short_lived_allocs = 0;  // the thresholds used

    std::vector<thread_stats> threads;
    std::vector<site_stats> sites;          // by count, descending (ties: by bytes, then address)
    std::vector<live_point> series;         // live bytes/objects over time, downsampled
};

// Estimated size of the glibc malloc chunk holding `n` requested bytes
// (8-byte header, 16-byte granularity, 32-byte minimum).
constexpr std::uint64_t glibc_chunk_bytes(std::uint64_t n) noexcept {
    const std::uint64_t c = (n + 8 + 15) & ~std::uint64_t(15);
    return c < 32 ? 32 : c;
}

// The power-of-two bucket of a size: 0 -> 0, 1 -> 1, 2 -> 2, 3..4 -> 3, 5..8 -> 4, ...
constexpr unsigned size_bucket_index(std::uint64_t s) noexcept {
    return s == 0 ? 0u : 1u + static_cast<unsigned>(std::bit_width(s - 1));
}
// The last bucket (k = 65: sizes above 2^63, seen only in damaged traces) ends
// at the largest size rather than at 2^64, which has no 64-bit value.
constexpr std::uint64_t size_bucket_hi(unsigned k) noexcept {
    return k == 0 ? 0 : k > 64 ? ~std::uint64_t(0) : std::uint64_t(1) << (k - 1);
}
constexpr std::uint64_t size_bucket_lo(unsigned k) noexcept {
    return k <= 1 ? k : (std::uint64_t(1) << (k - 2)) + 1;
}

namespace detail {

inline bool mismatched(trace::op alloc, trace::op release) {
    using trace::op;
    switch (alloc) {
        case op::new_: return release != op::delete_;
        case op::new_array: return release != op::delete_array;
        default: return release == op::delete_ || release == op::delete_array;
    }
}

} // namespace detail

// Builds a summary from a trace's events, fed one at a time in time order.
// It keeps the live objects (40 bytes each), the sites and threads, and 16
// bytes per freed object (for exact median lifetimes) — never the events, so
// `summary` streams a trace (trace_reader) in memory close to the file's size.
class summariser {
public:
    // `info`: the trace's process, threads and END record (its events are not
    // read); `events`: how many will be fed.
    summariser(const trace::trace& info, std::uint64_t events, const summary_options& opt = {}) : opt_(opt) {
        s_.exe = info.process.exe;
        s_.args = info.process.args;
        s_.pid = info.process.pid;
        s_.duration_ns = info.duration_ns;
        s_.events = events;
        s_.complete = info.complete;
        s_.truncation = info.truncation;
        s_.dropped = info.end.dropped;
        s_.short_lived_ns = opt.short_lived_ns;
        s_.short_lived_allocs = opt.short_lived_allocs;
        for (const auto& ti : info.threads) thread_of(ti.thread).os_tid = ti.os_tid;
        buckets_.resize(66);
        // Lifetime buckets: decades of ns up to >= 10 s; powers of two of
        // allocations up to >= 2^20.
        for (std::uint64_t lo = 0, hi = 100; lo <= 10'000'000'000ull; lo = hi, hi *= 10)
            s_.lifetime_ns.push_back({lo, lo == 10'000'000'000ull ? UINT64_MAX : hi, 0});
        s_.lifetime_allocs.push_back({0, 1, 0});
        for (std::uint64_t lo = 1; lo <= (1u << 20); lo *= 2)
            s_.lifetime_allocs.push_back({lo, lo == (1u << 20) ? UINT64_MAX : lo * 2, 0});
        // Downsampling: with more events than points, time is cut into
        // max_points/2 buckets and each bucket keeps its maximum and its last
        // value, so peaks survive and drops show.
        const std::size_t max_points = std::max<std::size_t>(opt.max_points, 4);
        downsample_ = events + 1 > max_points;
        nb_ = max_points / 2;
        if (downsample_) aggs_.resize(nb_);
        s_.series.push_back({0, 0, 0});
    }

    void add(const trace::event& e) {
        const std::uint64_t i = index_++;
        ++s_.by_op[std::uint8_t(e.kind) & 31];
        {
            auto& th = thread_of(e.thread);
            ++th.events;
            if (trace::is_free(e.kind) && e.address != 0) {
                ++s_.frees;
                ++s_.frees_by_op[std::uint8_t(e.kind) & 31];
                ++th.frees;
            }
        }
        if (e.kind == trace::op::realloc_) {
            ++s_.reallocs;
            if (!e.failed) {
                if (e.old_address == 0) ++s_.realloc_from_null;
                else if (e.address == 0) ++s_.realloc_to_zero;
                else if (e.address == e.old_address) ++s_.realloc_in_place;
                else ++s_.realloc_moved;
            }
        }
        if (e.failed && !trace::is_free(e.kind)) ++site(site_of(e.site)).failed;

        pairs_.feed(
            e,
            [&](const live& o, bool lost) {
                const std::uint32_t k = o.site & live::site_mask;
                if (!lost && detail::mismatched(class_op(o.site >> live::kind_shift),
                                                trace::is_free(e.kind) ? e.kind : trace::op::free_))
                    ++s_.mismatched_frees;
                live_bytes_ -= o.size;
                --live_objects_;
                site_live_[k] -= o.size;
                const std::uint64_t life = e.time_ns >= o.born_ns ? e.time_ns - o.born_ns : 0;
                const std::uint64_t between = births_ - o.id - 1;  // objects id+1 .. births-1 were born in between
                deaths_.push_back(death{life, k, static_cast<std::uint32_t>(between)});
                put(s_.lifetime_ns, life);
                put(s_.lifetime_allocs, between);
                if (life < opt_.short_lived_ns) ++s_.short_lived_ns_count;
                if (between < opt_.short_lived_allocs) ++s_.short_lived_allocs_count;
            },
            [&](std::uint32_t id) {
                const std::uint32_t k = site_of(e.site);
                auto& st = site(k);
                if (st.count == 0) st.min_size = st.max_size = e.size;
                st.min_size = std::min(st.min_size, e.size);
                st.max_size = std::max(st.max_size, e.size);
                ++st.count;
                st.bytes += e.size;
                st.ops |= 1u << (std::uint8_t(e.kind) & 31);
                ++s_.allocations;
                ++s_.allocations_by_op[std::uint8_t(e.kind) & 31];
                s_.bytes_requested += e.size;
                auto& th = thread_of(e.thread);
                ++th.allocations;
                th.bytes += e.size;
                auto& b = buckets_[size_bucket_index(e.size)];
                ++b.count;
                b.bytes += e.size;
                ++exact_[e.size];
                ++site_sizes_[site_size{e.size, k}];
                if (e.size <= 64) {
                    ++s_.small64;
                    s_.small64_bytes += e.size;
                    s_.small64_glibc_bytes += glibc_chunk_bytes(e.size);
                }
                if (e.size <= 256) {
                    ++s_.small256;
                    s_.small256_bytes += e.size;
                }
                live_bytes_ += e.size;
                ++live_objects_;
                ++births_;
                site_live_[k] += e.size;
                st.peak_live_bytes = std::max(st.peak_live_bytes, site_live_[k]);
                return live{e.size, e.time_ns, k | kind_class(e.kind) << live::kind_shift, id};
            });

        if (live_bytes_ > s_.peak_live_bytes) {
            s_.peak_live_bytes = live_bytes_;
            s_.peak_bytes_time_ns = e.time_ns;
            s_.peak_bytes_event = i;
            s_.peak_bytes_objects = live_objects_;
        }
        if (live_objects_ > s_.peak_live_objects) {
            s_.peak_live_objects = live_objects_;
            s_.peak_objects_time_ns = e.time_ns;
            s_.peak_objects_event = i;
        }
        const live_point p{e.time_ns, live_bytes_, live_objects_};
        if (!downsample_) {
            s_.series.push_back(p);
        } else {
            const auto k = std::min<std::size_t>(
                nb_ - 1, static_cast<std::size_t>(double(e.time_ns) / (double(s_.duration_ns) + 1.0) * double(nb_)));
            auto& a = aggs_[k];
            if (!a.used || p.bytes > a.max.bytes) a.max = p;
            a.max_objects = a.used ? std::max(a.max_objects, live_objects_) : live_objects_;
            a.last = p;
            a.used = true;
        }
    }

    summary finish() && {
        s_.unknown_frees = pairs_.unknown_frees;
        s_.null_frees = pairs_.null_frees;
        s_.failed = pairs_.failed;
        s_.reused_live = pairs_.reused_live;
        for (const auto& a : aggs_) {
            if (!a.used) continue;
            s_.series.push_back({a.max.time_ns, a.max.bytes, a.max_objects});
            if (a.last.time_ns > a.max.time_ns && (a.last.bytes != a.max.bytes || a.last.objects != a.max_objects))
                s_.series.push_back(a.last);
        }
        s_.never_freed = live_objects_;
        s_.never_freed_bytes = live_bytes_;

        // Histogram: the contiguous range of used buckets.
        unsigned first = 66, last = 0;
        for (unsigned k = 0; k < buckets_.size(); ++k)
            if (buckets_[k].count) {
                first = std::min(first, k);
                last = k;
            }
        for (unsigned k = first; k <= last && first < 66; ++k) {
            buckets_[k].lo = size_bucket_lo(k);
            buckets_[k].hi = size_bucket_hi(k);
            s_.histogram.push_back(buckets_[k]);
        }
        s_.top_sizes = most_frequent(exact_, opt_.top_sizes);

        // Lifetimes: group the freed objects by site for the per-site medians,
        // then the medians of all of them.
        s_.freed_objects = deaths_.size();
        std::sort(deaths_.begin(), deaths_.end(), [](const death& a, const death& b) { return a.site < b.site; });
        auto by_life = [](const death& a, const death& b) { return a.life < b.life; };
        for (std::size_t a = 0; a < deaths_.size();) {
            std::size_t b = a;
            while (b < deaths_.size() && deaths_[b].site == deaths_[a].site) ++b;
            auto& st = s_.sites[deaths_[a].site];
            st.freed = b - a;
            st.has_lifetime = true;
            const auto mid = deaths_.begin() + std::ptrdiff_t(a + (b - a) / 2);
            std::nth_element(deaths_.begin() + std::ptrdiff_t(a), mid, deaths_.begin() + std::ptrdiff_t(b), by_life);
            st.median_lifetime_ns = mid->life;
            a = b;
        }
        if (!deaths_.empty()) {
            const auto mid = deaths_.begin() + std::ptrdiff_t(deaths_.size() / 2);
            std::nth_element(deaths_.begin(), mid, deaths_.end(), by_life);
            s_.median_lifetime_ns = mid->life;
            std::nth_element(deaths_.begin(), mid, deaths_.end(),
                             [](const death& a, const death& b) { return a.between < b.between; });
            s_.median_lifetime_allocs = mid->between;
        }
        deaths_ = {};
        for (std::size_t k = 0; k < s_.sites.size(); ++k) {
            auto& st = s_.sites[k];
            st.never_freed = st.count - st.freed;
            st.never_freed_bytes = site_live_[k];
        }

        // Per site: exact sizes, most frequent first (ties: smaller first).
        {
            std::vector<std::pair<std::uint32_t, size_count>> all;
            all.reserve(site_sizes_.size());
            for (const auto& [key, count] : site_sizes_) all.push_back({key.site, size_count{key.size, count}});
            site_sizes_ = {};
            std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
                if (a.first != b.first) return a.first < b.first;
                if (a.second.count != b.second.count) return a.second.count > b.second.count;
                return a.second.size < b.second.size;
            });
            for (std::size_t a = 0; a < all.size();) {
                std::size_t b = a;
                while (b < all.size() && all[b].first == all[a].first) ++b;
                auto& st = s_.sites[all[a].first];
                st.distinct_sizes = b - a;
                for (std::size_t k = a; k < b && k - a < opt_.site_sizes; ++k) st.sizes.push_back(all[k].second);
                a = b;
            }
        }

        std::sort(s_.sites.begin(), s_.sites.end(), [](const site_stats& a, const site_stats& b) {
            if (a.count != b.count) return a.count > b.count;
            if (a.bytes != b.bytes) return a.bytes > b.bytes;
            return a.site < b.site;
        });
        std::sort(s_.threads.begin(), s_.threads.end(),
                  [](const thread_stats& a, const thread_stats& b) { return a.thread < b.thread; });
        return std::move(s_);
    }

private:
    // A live object: 24 bytes (32 with its address in the map).
    struct live {
        static constexpr unsigned kind_shift = 30;  // what to release it with, in the top bits of the site
        static constexpr std::uint32_t site_mask = (1u << kind_shift) - 1;
        std::uint64_t size = 0, born_ns = 0;
        std::uint32_t site = 0;
        std::uint32_t id = 0;
    };
    // The allocating op as far as detail::mismatched() cares, in two bits:
    // 0 the malloc family, 1 new, 2 new[].
    static std::uint32_t kind_class(trace::op o) noexcept {
        return o == trace::op::new_ ? 1 : o == trace::op::new_array ? 2 : 0;
    }
    static trace::op class_op(std::uint32_t c) noexcept {
        return c == 1 ? trace::op::new_ : c == 2 ? trace::op::new_array : trace::op::malloc_;
    }
    struct death {
        std::uint64_t life;
        std::uint32_t site, between;
    };
    struct site_size {
        std::uint64_t size;
        std::uint32_t site;
        bool operator==(const site_size&) const = default;
    };
    struct site_size_hash {
        std::size_t operator()(const site_size& k) const noexcept {
            return std::hash<std::uint64_t>()(k.size * 0x9e3779b97f4a7c15ull ^ k.site);
        }
    };
    struct agg {
        bool used = false;
        live_point max, last;
        std::uint64_t max_objects = 0;
    };

    static void put(std::vector<range_bucket>& v, std::uint64_t x) {
        for (auto& b : v)
            if (x >= b.lo && x < b.hi) {
                ++b.count;
                return;
            }
        ++v.back().count;
    }
    static std::vector<size_count> most_frequent(const std::unordered_map<std::uint64_t, std::uint64_t>& m,
                                                 std::size_t n) {
        std::vector<size_count> all;
        all.reserve(m.size());
        for (auto [size, count] : m) all.push_back({size, count});
        std::sort(all.begin(), all.end(), [](const size_count& a, const size_count& b) {
            return a.count != b.count ? a.count > b.count : a.size < b.size;
        });
        if (all.size() > n) all.resize(n);
        return all;
    }
    // Sites and threads by address and id: hash lookups, never scans.
    std::uint32_t site_of(std::uint64_t address) {
        auto [it, fresh] = site_index_.try_emplace(address, static_cast<std::uint32_t>(s_.sites.size()));
        if (fresh) {
            if (s_.sites.size() > live::site_mask) throw std::length_error("trace has more than 2^30 call sites");
            s_.sites.emplace_back();
            s_.sites.back().site = address;
            site_live_.push_back(0);
        }
        return it->second;
    }
    site_stats& site(std::uint32_t k) { return s_.sites[k]; }
    thread_stats& thread_of(std::uint32_t thread) {
        auto [it, fresh] = thread_index_.try_emplace(thread, static_cast<std::uint32_t>(s_.threads.size()));
        if (fresh) s_.threads.push_back(thread_stats{thread, 0, 0, 0, 0, 0});
        return s_.threads[it->second];
    }

    summary_options opt_;
    summary s_;
    trace::pairer<live> pairs_;
    std::unordered_map<std::uint64_t, std::uint32_t> site_index_;
    std::unordered_map<std::uint32_t, std::uint32_t> thread_index_;
    std::vector<std::uint64_t> site_live_;  // live bytes per site
    std::unordered_map<std::uint64_t, std::uint64_t> exact_;
    std::unordered_map<site_size, std::uint64_t, site_size_hash> site_sizes_;
    std::vector<size_bucket> buckets_;
    std::vector<death> deaths_;
    std::vector<agg> aggs_;
    bool downsample_ = false;
    std::size_t nb_ = 0;
    std::uint64_t index_ = 0, live_bytes_ = 0, live_objects_ = 0, births_ = 0;
};

// The summary of a trace whose events are in memory.
inline summary summarise(const trace::trace& t, const summary_options& opt = {}) {
    summariser s(t, t.events.size(), opt);
    for (const auto& e : t.events) s.add(e);
    return std::move(s).finish();
}

// The summary of a trace streamed from its reader (events decoded on the fly).
inline summary summarise(const trace::trace_reader& r, const summary_options& opt = {}) {
    summariser s(r.info(), r.info().event_count, opt);
    auto events = r.events();
    for (trace::event e; events.next(e);) s.add(e);
    return std::move(s).finish();
}

// Indices into s.sites, the top `n` by bytes (ties: by count, then address).
inline std::vector<std::size_t> sites_by_bytes(const summary& s, std::size_t n) {
    std::vector<std::size_t> idx(s.sites.size());
    for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
        const auto& x = s.sites[a];
        const auto& y = s.sites[b];
        if (x.bytes != y.bytes) return x.bytes > y.bytes;
        if (x.count != y.count) return x.count > y.count;
        return x.site < y.site;
    });
    if (idx.size() > n) idx.resize(n);
    return idx;
}

// Symbols for the sites of `s`, in the order of s.sites.
inline std::vector<symbol> symbolize_sites(const summary& s, const std::string& maps, bool use_addr2line,
                                           symbolize_stats* stats = nullptr) {
    std::vector<std::uint64_t> addrs;
    addrs.reserve(s.sites.size());
    for (const auto& st : s.sites) addrs.push_back(st.site);
    symbolize_options o;
    o.use_addr2line = use_addr2line;
    return symbolize(maps, addrs, o, stats);
}

// --- text formatting -------------------------------------------------------

namespace fmt {

inline std::string integer(std::uint64_t v) {
    std::string d = std::to_string(v), out;
    for (std::size_t i = 0; i < d.size(); ++i) {
        if (i && (d.size() - i) % 3 == 0) out += ',';
        out += d[i];
    }
    return out;
}

inline std::string bytes(std::uint64_t v) {
    static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    if (v < 1024) return std::to_string(v) + " B";
    double x = double(v);
    int u = 0;
    while (x >= 1024 && u < 5) {
        x /= 1024;
        ++u;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, x < 10 ? "%.2f %s" : x < 100 ? "%.1f %s" : "%.0f %s", x, units[u]);
    return buf;
}

inline std::string duration(std::uint64_t ns) {
    char buf[32];
    if (ns < 1000) std::snprintf(buf, sizeof buf, "%" PRIu64 " ns", ns);
    else if (ns < 1000000) std::snprintf(buf, sizeof buf, "%.1f us", double(ns) / 1e3);
    else if (ns < 1000000000) std::snprintf(buf, sizeof buf, "%.1f ms", double(ns) / 1e6);
    else std::snprintf(buf, sizeof buf, "%.3f s", double(ns) / 1e9);
    return buf;
}

inline std::string percent(std::uint64_t part, std::uint64_t whole) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%.1f%%", whole ? 100.0 * double(part) / double(whole) : 0.0);
    return buf;
}

inline std::string size_range(std::uint64_t lo, std::uint64_t hi) {
    if (lo == hi) return std::to_string(lo);
    return std::to_string(lo) + "-" + std::to_string(hi);
}

inline std::string ns_range(const range_bucket& b) {
    if (b.lo == 0) return "< " + duration(b.hi);
    if (b.hi == UINT64_MAX) return ">= " + duration(b.lo);
    return duration(b.lo) + " - " + duration(b.hi);
}

inline std::string alloc_range(const range_bucket& b) {
    if (b.hi == UINT64_MAX) return ">= " + integer(b.lo);
    if (b.hi == b.lo + 1) return integer(b.lo);
    return integer(b.lo) + "-" + integer(b.hi - 1);
}

inline std::string pad(std::string s, std::size_t w, bool right = true) {
    if (s.size() >= w) return s;
    return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
}

inline std::string clip(const std::string& s, std::size_t w) {
    return s.size() <= w ? s : s.substr(0, w - 3) + "...";
}

inline std::string bar(std::uint64_t part, std::uint64_t max, std::size_t width = 30) {
    if (!max || !part) return "";
    const auto k = std::max<std::size_t>(1, static_cast<std::size_t>(double(part) / double(max) * double(width) + 0.5));
    return std::string(k, '#');
}

// A text table whose column widths come from its cells, so that no value,
// however large, runs into its neighbour: two spaces between columns, every
// row indented by two. A left-aligned last column is not padded.
class table {
public:
    struct column {
        std::string title;
        bool right = true;
    };
    explicit table(std::vector<column> columns) : columns_(std::move(columns)) {}
    table& row(std::vector<std::string> cells) {
        cells.resize(columns_.size());
        rows_.push_back(std::move(cells));
        return *this;
    }
    std::string str() const {
        std::vector<std::size_t> w(columns_.size());
        for (std::size_t c = 0; c < columns_.size(); ++c) {
            w[c] = columns_[c].title.size();
            for (const auto& r : rows_) w[c] = std::max(w[c], r[c].size());
        }
        std::string o;
        auto line = [&](auto&& cell) {
            std::string l = "  ";
            for (std::size_t c = 0; c < columns_.size(); ++c) {
                if (c) l += "  ";
                const bool last = c + 1 == columns_.size();
                l += columns_[c].right ? pad(cell(c), w[c]) : last ? cell(c) : pad(cell(c), w[c], false);
            }
            while (l.size() > 2 && l.back() == ' ') l.pop_back();
            o += l + "\n";
        };
        line([&](std::size_t c) { return columns_[c].title; });
        for (const auto& r : rows_) line([&](std::size_t c) { return r[c]; });
        return o;
    }

private:
    std::vector<column> columns_;
    std::vector<std::vector<std::string>> rows_;
};

// "16" or "16-64 (3 sizes)".
inline std::string site_sizes(const site_stats& st) {
    if (st.count == 0) return "-";
    if (st.min_size == st.max_size) return std::to_string(st.min_size);
    return std::to_string(st.min_size) + "-" + std::to_string(st.max_size) + " (" + std::to_string(st.distinct_sizes) +
           " sizes)";
}

} // namespace fmt

// "malloc 10, new 3": the parts of s.allocations or of s.frees.
inline std::string format_ops(const summary& s, bool frees) {
    const auto& counts = frees ? s.frees_by_op : s.allocations_by_op;
    std::string out;
    for (unsigned k = 0; k < 32; ++k) {
        if (!counts[k] || !trace::is_known(std::uint8_t(k))) continue;
        if (!out.empty()) out += ", ";
        out += std::string(trace::op_name(trace::op(k))) + " " + fmt::integer(counts[k]);
    }
    return out;
}

inline std::string site_table(const summary& s, const std::vector<symbol>& syms, const std::vector<std::size_t>& idx) {
    using namespace fmt;
    table t({{"#"}, {"count"}, {"%"}, {"bytes"}, {"%"}, {"peak live"}, {"mean size"}, {"sizes", false},
             {"median life"}, {"never freed"}, {"site", false}});
    std::size_t rank = 0;
    for (auto i : idx) {
        const auto& st = s.sites[i];
        char mean[32];
        std::snprintf(mean, sizeof mean, "%.1f", st.mean_size());
        std::string site;
        if (i < syms.size()) {
            // Long demangled names are clipped so the location always shows;
            // an inlined site also names the function it was inlined into.
            const auto& sym = syms[i];
            site = sym.function().empty() ? sym.location() : clip(sym.function(), 100) + " (" + sym.location() + ")";
            if (sym.frames.size() > 1) {
                const auto& outer = sym.frames.back();
                site += "  [inlined into " + clip(outer.function.empty() ? std::string("??") : outer.function, 60);
                if (!outer.file.empty()) site += " (" + outer.file + ":" + std::to_string(outer.line) + ")";
                site += "]";
            }
        } else {
            char b[24];
            std::snprintf(b, sizeof b, "0x%" PRIx64, st.site);
            site = b;
        }
        t.row({std::to_string(++rank), integer(st.count), percent(st.count, s.allocations), bytes(st.bytes),
               percent(st.bytes, s.bytes_requested), bytes(st.peak_live_bytes), mean, clip(site_sizes(st), 40),
               st.has_lifetime ? duration(st.median_lifetime_ns) : std::string("-"), integer(st.never_freed), site});
    }
    return t.str();
}

// Threads listed one by one in the text report; the others are summed up.
inline constexpr std::size_t max_threads_listed = 32;

// Indices into s.threads: every thread (in id order) when there are at most
// `n`, else the `n` with the most events (ties: the lower id).
inline std::vector<std::size_t> busiest_threads(const summary& s, std::size_t n) {
    std::vector<std::size_t> idx(s.threads.size());
    for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    if (idx.size() > n) {
        std::stable_sort(idx.begin(), idx.end(),
                         [&](std::size_t a, std::size_t b) { return s.threads[a].events > s.threads[b].events; });
        idx.resize(n);
    }
    return idx;
}

// The text report. `syms` is parallel to s.sites (may be empty: raw addresses).
inline std::string format_text(const summary& s, const std::vector<symbol>& syms, std::size_t top,
                               const std::string& trace_path = {}) {
    using namespace fmt;
    std::string o;
    auto line = [&](const std::string& label, const std::string& value) { o += "  " + pad(label, 20, false) + value + "\n"; };
    o += "allotheque-trace summary" + (trace_path.empty() ? std::string() : ": " + trace_path) + "\n\n";

    o += "Process\n";
    line("executable", s.exe.empty() ? "(unknown)" : s.exe);
    std::string args;
    for (const auto& a : s.args) args += (args.empty() ? "" : " ") + a;
    line("arguments", args.empty() ? "(none)" : args);
    line("pid", std::to_string(s.pid));
    line("duration", duration(s.duration_ns));
    line("events", integer(s.events) + (s.dropped ? " (" + integer(s.dropped) + " dropped by the tracer)" : std::string()));
    line("trace", s.complete ? "complete" : "TRUNCATED: " + s.truncation);

    o += "\nTotals\n";
    if (s.events == 0) o += "  (the trace has no allocation events)\n";
    line("allocations", integer(s.allocations) + (s.allocations ? "   (" + format_ops(s, false) + ")" : std::string()));
    // free(NULL) is a call but releases nothing: it is in neither number.
    line("frees", integer(s.frees) + (s.frees ? "   (" + format_ops(s, true) + ")" : std::string()) +
                      (s.null_frees ? "   not counted: " + integer(s.null_frees) + " of NULL" : std::string()));
    line("reallocs", integer(s.reallocs) + (s.reallocs ? "   (from NULL " + integer(s.realloc_from_null) + ", to size 0 " +
                                                             integer(s.realloc_to_zero) + ", in place " +
                                                             integer(s.realloc_in_place) + ", moved " +
                                                             integer(s.realloc_moved) + ")"
                                                       : std::string()));
    line("failed", integer(s.failed) + (s.failed ? "   (returned NULL / threw)" : ""));
    line("unknown frees", integer(s.unknown_frees) + (s.unknown_frees ? "   (address not live in the trace)" : ""));
    line("null frees", integer(s.null_frees));
    if (s.mismatched_frees) line("mismatched frees", integer(s.mismatched_frees) + "   (e.g. new + free, new[] + delete)");
    if (s.reused_live) line("lost frees", integer(s.reused_live) + "   (address handed out again while live)");
    char mean[48];
    std::snprintf(mean, sizeof mean, "%.1f B", s.allocations ? double(s.bytes_requested) / double(s.allocations) : 0.0);
    line("bytes requested", bytes(s.bytes_requested) + " (" + integer(s.bytes_requested) + " B), mean " + mean);

    o += "\nPeak\n";
    line("live bytes", bytes(s.peak_live_bytes) + " (" + integer(s.peak_live_bytes) + " B) at " +
                           duration(s.peak_bytes_time_ns) + ", event " + integer(s.peak_bytes_event) + ", " +
                           integer(s.peak_bytes_objects) + " objects live then");
    line("live objects", integer(s.peak_live_objects) + " at " + duration(s.peak_objects_time_ns) + ", event " +
                             integer(s.peak_objects_event));
    line("never freed", integer(s.never_freed) + " objects, " + bytes(s.never_freed_bytes));

    o += "\nSmall objects\n";
    line("<= 64 B", percent(s.small64, s.allocations) + " of allocations (" + integer(s.small64) + "), " +
                        percent(s.small64_bytes, s.bytes_requested) + " of bytes");
    line("<= 256 B", percent(s.small256, s.allocations) + " of allocations (" + integer(s.small256) + "), " +
                         percent(s.small256_bytes, s.bytes_requested) + " of bytes");
    if (s.small64)
        line("glibc estimate", "the <= 64 B objects take ~" + bytes(s.small64_glibc_bytes) + " in glibc malloc chunks for " +
                                   bytes(s.small64_bytes) + " requested (x" +
                                   [&] {
                                       char b[16];
                                       std::snprintf(b, sizeof b, "%.2f",
                                                     s.small64_bytes ? double(s.small64_glibc_bytes) / double(s.small64_bytes)
                                                                     : 0.0);
                                       return std::string(b);
                                   }() +
                                   ")");
    if (!s.top_sizes.empty()) {
        std::string ts;
        for (std::size_t k = 0; k < s.top_sizes.size() && k < 8; ++k)
            ts += (k ? ", " : "") + std::to_string(s.top_sizes[k].size) + " B x" + integer(s.top_sizes[k].count) + " (" +
                  percent(s.top_sizes[k].count, s.allocations) + ")";
        line("top sizes", ts);
    }

    o += "\nSize histogram (power-of-two buckets)\n";
    if (s.histogram.empty()) o += "  (no allocations)\n";
    else {
        std::uint64_t maxc = 0;
        for (const auto& b : s.histogram) maxc = std::max(maxc, b.count);
        table h({{"size (B)", false}, {"count"}, {"%"}, {"bytes"}, {"%"}, {"", false}});
        for (const auto& b : s.histogram)
            h.row({size_range(b.lo, b.hi), integer(b.count), percent(b.count, s.allocations), bytes(b.bytes),
                   percent(b.bytes, s.bytes_requested), bar(b.count, maxc)});
        o += h.str();
        o += "  top exact sizes:\n";
        table e({{"size (B)", false}, {"count"}, {"%"}});
        for (std::size_t k = 0; k < s.top_sizes.size() && k < 10; ++k)
            e.row({std::to_string(s.top_sizes[k].size), integer(s.top_sizes[k].count),
                   percent(s.top_sizes[k].count, s.allocations)});
        o += e.str();
    }

    o += "\nLifetimes (" + integer(s.freed_objects) + " freed objects; " + integer(s.never_freed) + " never freed)\n";
    if (s.freed_objects == 0) o += "  (no object was freed)\n";
    else {
        line("median", duration(s.median_lifetime_ns) + ", " + integer(s.median_lifetime_allocs) +
                           " allocations in between");
        line("short-lived", percent(s.short_lived_ns_count, s.freed_objects) + " freed within " +
                                duration(s.short_lived_ns) + ", " + percent(s.short_lived_allocs_count, s.freed_objects) +
                                " freed before " + integer(s.short_lived_allocs) + " more allocations");
        // The two distributions side by side; the allocation one's empty
        // tail (beyond the ns rows) is left out.
        std::size_t rows = s.lifetime_ns.size();
        for (std::size_t k = rows; k < s.lifetime_allocs.size(); ++k)
            if (s.lifetime_allocs[k].count) rows = k + 1;
        table l({{"lifetime", false}, {"objects"}, {"%"}, {" ", false}, {"allocations in between", false}, {"objects"},
                 {"%"}});
        for (std::size_t k = 0; k < rows; ++k) {
            std::vector<std::string> r(7);
            if (k < s.lifetime_ns.size()) {
                const auto& b = s.lifetime_ns[k];
                r[0] = ns_range(b);
                r[1] = integer(b.count);
                r[2] = percent(b.count, s.freed_objects);
            }
            if (k < s.lifetime_allocs.size()) {
                const auto& b = s.lifetime_allocs[k];
                r[4] = alloc_range(b);
                r[5] = integer(b.count);
                r[6] = percent(b.count, s.freed_objects);
            }
            l.row(std::move(r));
        }
        o += l.str();
    }

    // A program may have run hundreds of thousands of threads: list the
    // busiest, sum up the rest.
    o += "\nThreads" + (s.threads.size() > max_threads_listed
                              ? " (" + integer(s.threads.size()) + "; the " + std::to_string(max_threads_listed) +
                                    " with the most events)"
                              : std::string()) +
         "\n";
    if (s.threads.empty()) o += "  (none)\n";
    else {
        const auto idx = busiest_threads(s, max_threads_listed);
        table t({{"thread"}, {"os tid"}, {"events"}, {"allocations"}, {"bytes"}, {"frees"}});
        for (auto i : idx) {
            const auto& th = s.threads[i];
            t.row({std::to_string(th.thread), std::to_string(th.os_tid), integer(th.events), integer(th.allocations),
                   bytes(th.bytes), integer(th.frees)});
        }
        o += t.str();
        if (s.threads.size() > max_threads_listed) {
            thread_stats rest;
            std::vector<bool> listed(s.threads.size());
            for (auto i : idx) listed[i] = true;
            for (std::size_t i = 0; i < s.threads.size(); ++i) {
                if (listed[i]) continue;
                rest.events += s.threads[i].events;
                rest.allocations += s.threads[i].allocations;
                rest.bytes += s.threads[i].bytes;
                rest.frees += s.threads[i].frees;
            }
            o += "  ... and " + integer(s.threads.size() - idx.size()) + " more threads: " + integer(rest.events) +
                 " events, " + integer(rest.allocations) + " allocations, " + bytes(rest.bytes) + ", " +
                 integer(rest.frees) + " frees\n";
        }
    }

    const std::size_t n = std::min(top, s.sites.size());
    o += "\nTop " + std::to_string(n) + " call sites by count (of " + integer(s.sites.size()) + " sites)\n";
    if (n) {
        std::vector<std::size_t> idx(n);
        for (std::size_t i = 0; i < n; ++i) idx[i] = i;
        o += site_table(s, syms, idx);
    } else o += "  (none)\n";
    o += "\nTop " + std::to_string(n) + " call sites by bytes\n";
    if (n) o += site_table(s, syms, sites_by_bytes(s, n));
    else o += "  (none)\n";
    return o;
}

struct html_options {
    std::string title = "allotheque-trace summary";
    std::string trace_path;
    std::size_t max_sites = 5000;  // sites embedded in the page (top by count and by bytes)
    std::size_t max_threads = 1000;  // threads embedded (the most events first)
};

// Defined in html_report.hpp (included at the end of this header).
inline std::string html_report(const summary& s, const std::vector<symbol>& syms, const html_options& opt = {});

// --- the command -----------------------------------------------------------

inline int summary_usage(std::FILE* out, int status) {
    std::fputs("usage: allotheque-trace summary [--top N] [--html FILE] [--allow-truncated] [--no-symbols] TRACE\n"
               "  --top N            call sites listed by count and by bytes (default 10)\n"
               "  --html FILE        also write a self-contained HTML report (sortable,\n"
               "                     filterable call-site table, live-memory plots)\n"
               "  --allow-truncated  summarise what a killed program left (no END record)\n"
               "  --no-symbols       do not run addr2line: sites as module+0xoffset\n",
               out);
    return status;
}

// The whole `summary` command; text report on `out`, errors on `err`.
inline int summary_main(int argc, char** argv, std::FILE* out, std::FILE* err) {
    std::size_t top = 10;
    std::string html_path, trace_path;
    bool allow_truncated = false, symbols = true;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&](const char* name) -> const char* {
            if (i + 1 >= argc) {
                std::fprintf(err, "allotheque-trace summary: %s needs a value\n", name);
                return nullptr;
            }
            return argv[++i];
        };
        if (a == "--help" || a == "-h") return summary_usage(out, 0);
        if (a == "--top") {
            const char* v = value("--top");
            if (!v) return 2;
            char* end = nullptr;
            const long long k = std::strtoll(v, &end, 10);
            if (!*v || *end || k < 0) {
                std::fprintf(err, "allotheque-trace summary: --top takes a non-negative number, not '%s'\n", v);
                return 2;
            }
            top = static_cast<std::size_t>(k);
        } else if (a == "--html") {
            const char* v = value("--html");
            if (!v) return 2;
            html_path = v;
        } else if (a == "--allow-truncated") {
            allow_truncated = true;
        } else if (a == "--no-symbols") {
            symbols = false;
        } else if (a == "--") {
            if (i + 1 < argc) trace_path = argv[++i];
        } else if (!a.empty() && a[0] == '-') {
            std::fprintf(err, "allotheque-trace summary: unknown option '%s'\n", a.c_str());
            return summary_usage(err, 2);
        } else if (trace_path.empty()) {
            trace_path = a;
        } else {
            std::fprintf(err, "allotheque-trace summary: only one trace, please ('%s' and '%s')\n", trace_path.c_str(),
                         a.c_str());
            return 2;
        }
    }
    if (trace_path.empty()) {
        std::fputs("allotheque-trace summary: no trace given\n", err);
        return summary_usage(err, 2);
    }
    try {
        trace::read_options ro;
        ro.allow_truncated = allow_truncated;
        const trace::trace_reader reader = trace::trace_reader::open(trace_path, ro);
        const trace::trace& t = reader.info();
        if (!t.truncation.empty())
            std::fprintf(err, "allotheque-trace summary: warning: %s; summarising what was recorded\n",
                         t.truncation.c_str());
        const summary s = summarise(reader);
        symbolize_stats st;
        const auto syms = symbolize_sites(s, t.maps, symbols, &st);
        if (!st.failed.empty()) {
            std::string list;
            for (const auto& m : st.failed) list += (list.empty() ? "" : ", ") + m;
            std::fprintf(err,
                         "allotheque-trace summary: note: no symbols for %zu module(s) (missing, changed since the "
                         "trace, or addr2line failed; their sites show as module+offset): %s\n",
                         st.failed.size(), list.c_str());
        }
        if (st.outside_symbols)
            std::fprintf(err,
                         "allotheque-trace summary: note: %zu call site(s) lie outside every symbol of their module "
                         "(stripped code, e.g. static functions): shown as module+offset, not named after the "
                         "symbol before them\n",
                         st.outside_symbols);
        const std::string text = format_text(s, syms, top, trace_path);
        std::fwrite(text.data(), 1, text.size(), out);
        if (!html_path.empty()) {
            html_options ho;
            ho.title = "allotheque-trace summary: " + (s.exe.empty() ? trace_path : s.exe);
            ho.trace_path = trace_path;
            const std::string page = html_report(s, syms, ho);
            std::ofstream f(html_path, std::ios::binary | std::ios::trunc);
            if (!f || !f.write(page.data(), std::streamsize(page.size())) || !f.flush()) {
                std::fprintf(err, "allotheque-trace summary: cannot write '%s'\n", html_path.c_str());
                return 1;
            }
            std::fprintf(err, "allotheque-trace summary: HTML report written to %s\n", html_path.c_str());
        }
        std::fflush(out);
        return 0;
    } catch (const trace::trace_error& e) {
        std::fprintf(err, "allotheque-trace summary: error: %s\n", e.what());
        if (!allow_truncated && std::string(e.what()).find("truncated") != std::string::npos)
            std::fputs("allotheque-trace summary: (use --allow-truncated to summarise what was recorded)\n", err);
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(err, "allotheque-trace summary: error: %s\n", e.what());
        return 1;
    }
}

} // namespace allotheque::tools

#include "html_report.hpp"

#endif
