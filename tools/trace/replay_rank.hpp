// Ranking the allocators of `allotheque-trace replay` (docs/trace.md,
// "Score and recommendation"), apart from the runs so the tests can feed it
// synthetic measurements.
//
// Each allocator ran `repeat` times: the medians rank it, and the spread of
// its runs is the noise. An allocator wins a title (fastest, leanest,
// recommended) only if its whole range of runs beats every other
// allocator's: when ranges overlap, the answer is "no clear winner" and the
// candidates within the noise are named, rather than a pick made on noise.
#ifndef ALLOTHEQUE_TOOLS_TRACE_REPLAY_RANK_HPP
#define ALLOTHEQUE_TOOLS_TRACE_REPLAY_RANK_HPP

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

namespace allotheque::tools::replay {

// One allocator's runs and what the ranking makes of them.
struct row {
    std::string name;
    std::string status = "ok";  // ok | failed | skipped
    std::string note;
    std::vector<double> seconds;  // per run
    std::vector<double> peak;     // per run, bytes
    double peak_touched = 0;    // the peak of the bytes the replay writes: fragmentation's base
    // Filled by rank() for the rows that are ok.
    double time_s = 0, peak_os = 0, frag = 0;  // medians
    double time_ratio = 0, memory_ratio = 0, score = 0;
    double score_lo = 0, score_hi = 0;  // the score of the best and the worst run
    bool has_frag = false;
};

// Who holds a title: `best` has the lowest median; `tied` the others whose
// range of runs overlaps best's (empty: a clear winner).
struct verdict {
    const row* best = nullptr;
    std::vector<const row*> tied;
    bool clear() const { return tied.empty(); }
};

struct ranking {
    const row* base = nullptr;   // the baseline (glibc, else the first that ran)
    std::vector<row*> order;     // ok rows by score, then the others
    verdict fastest, leanest, recommended;
    int repeat = 0;              // runs per allocator (the fewest any ok row has)
    bool noise_known() const { return repeat >= 2; }
};

inline double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

namespace detail {

// A peak below one page counts as one page (a tiny trace may not grow the
// resident set at all); a time below a microsecond as a microsecond.
inline constexpr double page_floor = 4096, time_floor = 1e-6;

template <class Value>
verdict decide(const std::vector<row*>& ok, Value value) {
    verdict v;
    double best_median = 0, best_hi = 0;
    for (const row* r : ok) {
        const auto [median_v, lo, hi] = value(*r);
        (void)lo;
        if (!v.best || median_v < best_median) {
            v.best = r;
            best_median = median_v;
            best_hi = hi;
        }
    }
    for (const row* r : ok) {
        if (r == v.best) continue;
        const auto [median_v, lo, hi] = value(*r);
        (void)median_v;
        (void)hi;
        if (lo <= best_hi) v.tied.push_back(r);
    }
    return v;
}

struct spread {
    double median, lo, hi;
};

inline spread of(const std::vector<double>& v) {
    return {median(v), *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end())};
}

} // namespace detail

// Medians, ratios to the baseline, scores (time_ratio x memory_ratio; each
// run's score against the baseline's medians gives the range), the order,
// and the three verdicts. Rows that are not ok are ranked last.
inline ranking rank(std::vector<row>& rows) {
    ranking k;
    std::vector<row*> ok;
    for (auto& r : rows) {
        if (r.status != "ok" || r.seconds.empty() || r.peak.size() != r.seconds.size()) {
            if (r.status == "ok") r.status = "failed";
            continue;
        }
        r.time_s = median(r.seconds);
        r.peak_os = median(r.peak);
        r.has_frag = r.peak_touched > 0;
        if (r.has_frag) r.frag = (r.peak_os - r.peak_touched) / r.peak_touched;
        if (!k.base || r.name == "glibc") k.base = &r;
        ok.push_back(&r);
        k.repeat = k.repeat == 0 ? int(r.seconds.size()) : std::min(k.repeat, int(r.seconds.size()));
    }
    if (!k.base) return k;
    const double base_t = std::max(k.base->time_s, detail::time_floor);
    const double base_m = std::max(k.base->peak_os, detail::page_floor);
    auto score_of = [&](double t, double m) {
        return std::max(t, detail::time_floor) / base_t * (std::max(m, detail::page_floor) / base_m);
    };
    for (row* r : ok) {
        r->time_ratio = std::max(r->time_s, detail::time_floor) / base_t;
        r->memory_ratio = std::max(r->peak_os, detail::page_floor) / base_m;
        r->score = r->time_ratio * r->memory_ratio;
        r->score_lo = r->score_hi = score_of(r->seconds[0], r->peak[0]);
        for (std::size_t i = 1; i < r->seconds.size(); ++i) {
            const double s = score_of(r->seconds[i], r->peak[i]);
            r->score_lo = std::min(r->score_lo, s);
            r->score_hi = std::max(r->score_hi, s);
        }
    }
    for (auto& r : rows) k.order.push_back(&r);
    std::stable_sort(k.order.begin(), k.order.end(), [](const row* a, const row* b) {
        if ((a->status == "ok") != (b->status == "ok")) return a->status == "ok";
        return a->status == "ok" && a->score < b->score;
    });
    std::vector<row*> by_score;
    for (row* r : k.order)
        if (r->status == "ok") by_score.push_back(r);
    k.fastest = detail::decide(by_score, [](const row& r) { return detail::of(r.seconds); });
    // Ties on memory go to the faster: it comes first among equal medians.
    std::vector<row*> by_time = by_score;
    std::stable_sort(by_time.begin(), by_time.end(), [](const row* a, const row* b) { return a->time_s < b->time_s; });
    k.leanest = detail::decide(by_time, [](const row& r) { return detail::of(r.peak); });
    k.recommended = detail::decide(by_score, [](const row& r) { return detail::spread{r.score, r.score_lo, r.score_hi}; });
    return k;
}

inline std::string format_number(const char* f, double v) {
    char b[64];
    std::snprintf(b, sizeof b, f, v);
    return b;
}

// Allocators named in a "no clear winner" line (the JSON has them all).
inline constexpr std::size_t max_named = 5;

// "a", "a and b", "a, b and c", "a, b, c, d, e and 3 more".
inline std::string name_list(const verdict& v) {
    std::vector<const row*> all{v.best};
    all.insert(all.end(), v.tied.begin(), v.tied.end());
    const std::size_t shown = std::min(all.size(), max_named);
    std::string s;
    for (std::size_t i = 0; i < shown; ++i)
        s += (i == 0 ? "" : i + 1 == all.size() ? " and " : ", ") + all[i]->name;
    if (shown < all.size()) s += " and " + std::to_string(all.size() - shown) + " more";
    return s;
}

namespace detail {

inline std::string range(const char* f, double lo, double hi, double scale) {
    return format_number(f, lo * scale) + "-" + format_number(f, hi * scale);
}
inline std::string runs(const ranking& k) { return std::to_string(k.repeat) + " run" + (k.repeat == 1 ? "" : "s"); }

} // namespace detail

// What the "recommended:" line says after its colon.
inline std::string recommendation(const ranking& k) {
    if (!k.base) return {};
    const row& b = *k.recommended.best;
    if (!k.recommended.clear()) {
        std::string o = "no clear winner -- the scores of " + name_list(k.recommended) +
                        " are within the noise of each other (" + b.name + " " +
                        detail::range("%.2f", b.score_lo, b.score_hi, 1);
        const auto& tied = k.recommended.tied;
        for (std::size_t i = 0; i + 1 < max_named && i < tied.size(); ++i)
            o += ", " + tied[i]->name + " " + detail::range("%.2f", tied[i]->score_lo, tied[i]->score_hi, 1);
        return o + (tied.size() + 1 > max_named ? ", ..." : "") + " over " + detail::runs(k) + "); the lowest median is " + b.name + "'s (" +
               format_number("%.2f", b.score) + "): any of them will do, or replay with more --repeat to separate them";
    }
    std::string o = b.name + " -- " + format_number("%.2f", b.time_ratio) + "x " + k.base->name + "'s time and " +
                    format_number("%.2f", b.memory_ratio) + "x its peak memory: the lowest time x memory score (" +
                    format_number("%.2f", b.score) + ")";
    if (&b == k.fastest.best && k.fastest.clear() && &b == k.leanest.best && k.leanest.clear())
        o += ", and both the fastest and the leanest";
    else if (&b == k.fastest.best && k.fastest.clear()) o += ", and the fastest";
    else if (&b == k.leanest.best && k.leanest.clear()) o += ", and the leanest";
    return o;
}

// "LABEL  best (what)" for a clear winner, else "LABEL  no clear winner: a
// and b are within the noise (a RANGE, b RANGE over N runs)".
template <class What, class Range>
std::string title_line(const char* label, const ranking& k, const verdict& v, What what, Range range) {
    std::string o = std::string(label) + " ";
    if (v.clear()) return o + v.best->name + " (" + what(*v.best) + ")\n";
    o += "no clear winner: " + name_list(v) + " are within the noise (" + v.best->name + " " + range(*v.best);
    for (std::size_t i = 0; i + 1 < max_named && i < v.tied.size(); ++i)
        o += ", " + v.tied[i]->name + " " + range(*v.tied[i]);
    return o + (v.tied.size() + 1 > max_named ? ", ..." : "") + " over " + detail::runs(k) + ")\n";
}

// The three verdict lines (and notes on noise), as printed under the table.
inline std::string format_verdicts(const ranking& k) {
    if (!k.base) return {};
    const std::string& base = k.base->name;
    auto times = [](const row& r) {
        return detail::range("%.3f", *std::min_element(r.seconds.begin(), r.seconds.end()),
                             *std::max_element(r.seconds.begin(), r.seconds.end()), 1e3);
    };
    auto peaks = [](const row& r) {
        return detail::range("%.2f", *std::min_element(r.peak.begin(), r.peak.end()),
                             *std::max_element(r.peak.begin(), r.peak.end()), 1e-6);
    };
    std::string o;
    o += title_line("fastest: ", k, k.fastest,
                    [&](const row& r) {
                        return format_number("%.3f", r.time_s * 1e3) + " ms, " + format_number("%.2f", r.time_ratio) +
                               "x " + base;
                    },
                    [&](const row& r) { return times(r) + " ms"; });
    o += title_line("leanest: ", k, k.leanest,
                    [&](const row& r) {
                        return format_number("%.2f", r.peak_os / 1e6) + " MB peak, " +
                               format_number("%.2f", r.memory_ratio) + "x " + base;
                    },
                    [&](const row& r) { return peaks(r) + " MB"; });
    o += "recommended: " + recommendation(k) + "\n";
    if (!k.noise_known())
        o += "note: one run per allocator: the noise is unknown, so any lead above may be noise; --repeat 3 or "
             "more tells\n";
    if (k.base->time_s < 0.01)
        o += "note: the replay takes " + format_number("%.3f", k.base->time_s * 1e3) +
             " ms: timings this short are noisy; a longer trace or --repeat helps\n";
    return o;
}

} // namespace allotheque::tools::replay

#endif
