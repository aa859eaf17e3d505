// The HTML report of `allotheque-trace summary --html FILE`: one
// self-contained page (no external scripts, styles, fonts or network), the
// summary embedded as JSON, drawn by vanilla JS as inline SVG:
//
//   #live-chart, #objects-chart   live bytes / live objects over time
//   #size-chart                   power-of-two size histogram
//   #lifetime-chart, #between-chart  lifetimes in ns and in allocations
//   #site-table                   call sites; th[data-key=...] sorts (click
//                                 again to reverse), #site-filter (text),
//                                 #size-min / #size-max filter, #site-count
//                                 says "N of M sites"
//   #report-data                  the JSON (application/json script)
//
// Every string the trace controls (paths, function names) travels inside the
// JSON with <, > and & escaped as \u003c.. so "</script>" cannot end the
// script element, and is put into the page with textContent only.
#ifndef ALLOTHEQUE_TOOLS_TRACE_HTML_REPORT_HPP
#define ALLOTHEQUE_TOOLS_TRACE_HTML_REPORT_HPP

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "summary.hpp"

namespace allotheque::tools {

namespace html {

// A JSON string literal, safe inside <script> and in any HTML context.
inline std::string json_string(std::string_view s) {
    std::string o;
    o.reserve(s.size() + 2);
    o += '"';
    for (std::size_t i = 0; i < s.size(); ++i) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        char buf[8];
        switch (c) {
            case '"': o += "\\\""; break;
            case '\\': o += "\\\\"; break;
            case '\n': o += "\\n"; break;
            case '\r': o += "\\r"; break;
            case '\t': o += "\\t"; break;
            case '<': o += "\\u003c"; break;
            case '>': o += "\\u003e"; break;
            case '&': o += "\\u0026"; break;
            default:
                if (c < 0x20 || c == 0x7f) {
                    std::snprintf(buf, sizeof buf, "\\u%04x", c);
                    o += buf;
                } else if (c == 0xe2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
                           (static_cast<unsigned char>(s[i + 2]) == 0xa8 || static_cast<unsigned char>(s[i + 2]) == 0xa9)) {
                    o += static_cast<unsigned char>(s[i + 2]) == 0xa8 ? "\\u2028" : "\\u2029";
                    i += 2;
                } else {
                    o += static_cast<char>(c);
                }
        }
    }
    o += '"';
    return o;
}

// Text for HTML element content and attribute values.
inline std::string escape(std::string_view s) {
    std::string o;
    for (char c : s) {
        switch (c) {
            case '&': o += "&amp;"; break;
            case '<': o += "&lt;"; break;
            case '>': o += "&gt;"; break;
            case '"': o += "&quot;"; break;
            case '\'': o += "&#39;"; break;
            default: o += c;
        }
    }
    return o;
}

inline std::string hex(std::uint64_t v) {
    char b[24];
    std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
    return b;
}

inline std::string number(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.6g", v);
    return b;
}

// Builds a JSON object field by field.
class object {
public:
    object& raw(const char* key, const std::string& value) {
        o_ += first_ ? "{" : ",";
        first_ = false;
        o_ += '"';
        o_ += key;
        o_ += "\":";
        o_ += value;
        return *this;
    }
    object& str(const char* key, std::string_view v) { return raw(key, json_string(v)); }
    object& num(const char* key, std::uint64_t v) { return raw(key, std::to_string(v)); }
    object& real(const char* key, double v) { return raw(key, number(v)); }
    object& boolean(const char* key, bool v) { return raw(key, v ? "true" : "false"); }
    std::string done() { return first_ ? "{}" : o_ + "}"; }

private:
    std::string o_;
    bool first_ = true;
};

template <class T, class F>
std::string array(const std::vector<T>& v, F f) {
    std::string o = "[";
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (i) o += ',';
        o += f(v[i]);
    }
    return o + "]";
}

inline std::string ranges(const std::vector<range_bucket>& v) {
    return array(v, [](const range_bucket& b) {
        return object().num("lo", b.lo).raw("hi", b.hi == UINT64_MAX ? "null" : std::to_string(b.hi)).num("count", b.count).done();
    });
}

// Sites embedded in the page: all, or the top max/2 by count plus the top by
// bytes up to `max` in all; in the order of s.sites.
inline std::vector<std::size_t> embedded_sites(const summary& s, std::size_t max) {
    std::vector<std::size_t> idx;
    if (s.sites.size() <= max) {
        for (std::size_t i = 0; i < s.sites.size(); ++i) idx.push_back(i);
        return idx;
    }
    std::vector<char> take(s.sites.size(), 0);
    std::size_t n = 0;
    for (std::size_t i = 0; i < max / 2; ++i, ++n) take[i] = 1;
    for (auto i : sites_by_bytes(s, s.sites.size())) {
        if (n >= max) break;
        if (!take[i]) {
            take[i] = 1;
            ++n;
        }
    }
    for (std::size_t i = 0; i < take.size(); ++i)
        if (take[i]) idx.push_back(i);
    return idx;
}

// The summary as JSON (what the page's script draws).
inline std::string report_json(const summary& s, const std::vector<symbol>& syms, const html_options& opt) {
    object r;
    r.str("title", opt.title).str("trace", opt.trace_path);
    r.raw("process", object()
                         .str("exe", s.exe)
                         .raw("args", array(s.args, [](const std::string& a) { return json_string(a); }))
                         .num("pid", s.pid)
                         .num("duration_ns", s.duration_ns)
                         .num("events", s.events)
                         .num("dropped", s.dropped)
                         .boolean("complete", s.complete)
                         .str("truncation", s.truncation)
                         .done());
    // The parts of the Allocations and Frees cards, adding up to them.
    std::string ops_alloc = "{", ops_free = "{";
    for (unsigned k = 0; k < 32; ++k) {
        if (!trace::is_known(std::uint8_t(k))) continue;
        for (const bool frees : {false, true}) {
            const std::uint64_t n = frees ? s.frees_by_op[k] : s.allocations_by_op[k];
            if (!n) continue;
            std::string& dst = frees ? ops_free : ops_alloc;
            if (dst.size() > 1) dst += ',';
            dst += json_string(trace::op_name(trace::op(k))) + ":" + std::to_string(n);
        }
    }
    r.raw("totals", object()
                        .num("allocations", s.allocations)
                        .num("frees", s.frees)
                        .num("null_frees", s.null_frees)
                        .num("reallocs", s.reallocs)
                        .num("realloc_from_null", s.realloc_from_null)
                        .num("realloc_to_zero", s.realloc_to_zero)
                        .num("realloc_in_place", s.realloc_in_place)
                        .num("realloc_moved", s.realloc_moved)
                        .num("failed", s.failed)
                        .num("unknown_frees", s.unknown_frees)
                        .num("mismatched_frees", s.mismatched_frees)
                        .num("lost_frees", s.reused_live)
                        .num("bytes", s.bytes_requested)
                        .raw("alloc_ops", ops_alloc + "}")
                        .raw("free_ops", ops_free + "}")
                        .done());
    r.raw("peak", object()
                      .num("bytes", s.peak_live_bytes)
                      .num("bytes_time_ns", s.peak_bytes_time_ns)
                      .num("bytes_event", s.peak_bytes_event)
                      .num("bytes_objects", s.peak_bytes_objects)
                      .num("objects", s.peak_live_objects)
                      .num("objects_time_ns", s.peak_objects_time_ns)
                      .num("never_freed", s.never_freed)
                      .num("never_freed_bytes", s.never_freed_bytes)
                      .done());
    r.raw("small", object()
                       .num("le64", s.small64)
                       .num("le64_bytes", s.small64_bytes)
                       .num("le256", s.small256)
                       .num("le256_bytes", s.small256_bytes)
                       .num("le64_glibc_bytes", s.small64_glibc_bytes)
                       .done());
    r.raw("hist", array(s.histogram, [](const size_bucket& b) {
              return object().num("lo", b.lo).num("hi", b.hi).num("count", b.count).num("bytes", b.bytes).done();
          }));
    r.raw("top_sizes", array(s.top_sizes, [](const size_count& c) { return object().num("size", c.size).num("count", c.count).done(); }));
    r.raw("life", object()
                      .num("freed", s.freed_objects)
                      .num("median_ns", s.median_lifetime_ns)
                      .num("median_allocs", s.median_lifetime_allocs)
                      .num("short_ns", s.short_lived_ns)
                      .num("short_ns_count", s.short_lived_ns_count)
                      .num("short_allocs", s.short_lived_allocs)
                      .num("short_allocs_count", s.short_lived_allocs_count)
                      .raw("ns", ranges(s.lifetime_ns))
                      .raw("allocs", ranges(s.lifetime_allocs))
                      .done());
    std::vector<thread_stats> threads;
    for (auto i : busiest_threads(s, opt.max_threads)) threads.push_back(s.threads[i]);
    r.raw("threads", array(threads, [](const thread_stats& t) {
              return object()
                  .num("thread", t.thread)
                  .num("tid", t.os_tid)
                  .num("events", t.events)
                  .num("allocations", t.allocations)
                  .num("bytes", t.bytes)
                  .num("frees", t.frees)
                  .done();
          }));
    r.num("threads_total", s.threads.size());
    // Time series as three parallel arrays (compact).
    std::string ts = "[", tb = "[", to = "[";
    for (std::size_t i = 0; i < s.series.size(); ++i) {
        if (i) {
            ts += ',';
            tb += ',';
            to += ',';
        }
        ts += std::to_string(s.series[i].time_ns);
        tb += std::to_string(s.series[i].bytes);
        to += std::to_string(s.series[i].objects);
    }
    r.raw("series", object().raw("t", ts + "]").raw("b", tb + "]").raw("o", to + "]").done());

    const auto idx = embedded_sites(s, opt.max_sites);
    std::string sites = "[";
    for (std::size_t n = 0; n < idx.size(); ++n) {
        const std::size_t i = idx[n];
        const site_stats& st = s.sites[i];
        const symbol sym = i < syms.size() ? syms[i] : symbol{st.site, {}, 0, {}};
        std::string ops;
        for (unsigned k = 0; k < 32; ++k)
            if (st.ops & (1u << k)) ops += (ops.empty() ? "" : ", ") + std::string(trace::op_name(trace::op(k)));
        const frame* f0 = nullptr;
        for (const auto& f : sym.frames)
            if (!f.file.empty()) {
                f0 = &f;
                break;
            }
        if (n) sites += ',';
        sites += object()
                     .num("id", n)
                     .num("rank", i + 1)
                     .str("addr", hex(st.site))
                     .str("fn", sym.function())
                     .str("loc", sym.location())
                     .str("file", f0 ? f0->file : std::string())
                     .num("line", f0 ? f0->line : 0)
                     .str("module", sym.module)
                     .str("mloc", sym.module_location())
                     .str("inl", sym.inlined_into())
                     .str("ops", ops)
                     .num("count", st.count)
                     .num("bytes", st.bytes)
                     .num("peak", st.peak_live_bytes)
                     .real("mean", st.mean_size())
                     .num("min", st.min_size)
                     .num("max", st.max_size)
                     .num("nsizes", st.distinct_sizes)
                     .raw("sizes", array(st.sizes, [](const size_count& c) {
                              // Appended, not "[" + to_string(...): g++ 12 at -O3 warns
                              // (-Wrestrict) on that form, a known false positive.
                              std::string e(1, '[');
                              e += std::to_string(c.size);
                              e += ',';
                              e += std::to_string(c.count);
                              e += ']';
                              return e;
                          }))
                     .boolean("more", st.distinct_sizes > st.sizes.size())
                     .raw("life", st.has_lifetime ? std::to_string(st.median_lifetime_ns) : std::string("null"))
                     .num("freed", st.freed)
                     .num("leak", st.never_freed)
                     .num("leak_bytes", st.never_freed_bytes)
                     .num("failed", st.failed)
                     .done();
    }
    r.raw("sites", sites + "]");
    r.num("sites_total", s.sites.size());
    return r.done();
}

inline constexpr std::string_view style = R"ATQ(
:root { --fg:#1d2330; --muted:#5d6677; --line:#d8dde6; --bg:#ffffff; --panel:#f5f7fa; --accent:#2563c9; --accent2:#d9480f; }
* { box-sizing: border-box; }
body { margin: 0; padding: 20px 28px 40px; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg); }
h1 { font-size: 21px; margin: 0 0 4px; word-break: break-all; }
h2 { font-size: 17px; margin: 28px 0 10px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
.sub { color: var(--muted); margin: 0 0 12px; word-break: break-all; }
.warn { background: #fff4e5; border: 1px solid #f0b46b; padding: 6px 10px; border-radius: 4px; margin: 8px 0; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(190px, 1fr)); gap: 10px; }
.card { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 8px 12px; }
.card .k { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .03em; }
.card .v { font-size: 19px; font-weight: 600; }
.card .d { color: var(--muted); font-size: 12px; }
.row2 { display: grid; grid-template-columns: 1fr 1fr; gap: 18px; }
@media (max-width: 1000px) { .row2 { grid-template-columns: 1fr; } }
svg.chart { width: 100%; height: auto; background: #fff; border: 1px solid var(--line); border-radius: 6px; display: block; }
svg .axis { stroke: #9aa3b2; stroke-width: 1; }
svg .grid { stroke: #edf0f5; stroke-width: 1; }
svg text { font-size: 11px; fill: var(--muted); }
svg .line { fill: none; stroke: var(--accent); stroke-width: 1.6; }
svg .area { fill: rgba(37, 99, 201, .12); stroke: none; }
svg .line.obj { stroke: #2f9e44; }
svg .area.obj { fill: rgba(47, 158, 68, .12); }
svg .peak { fill: var(--accent2); }
svg text.peak-label { fill: var(--accent2); font-weight: 600; }
svg .cursor { stroke: #888; stroke-dasharray: 3 3; }
svg text.cursor-label { fill: var(--fg); }
svg .bar1 { fill: var(--accent); }
svg .bar2 { fill: #f59f00; }
table { border-collapse: collapse; width: 100%; }
th, td { padding: 4px 8px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.small { width: auto; }
#site-table th { position: sticky; top: 0; background: var(--panel); cursor: pointer; user-select: none; white-space: nowrap; }
#site-table th[aria-sort="ascending"]::after { content: " \25B2"; color: var(--accent); }
#site-table th[aria-sort="descending"]::after { content: " \25BC"; color: var(--accent); }
#site-table tr.site-row:hover { background: #f0f5ff; cursor: pointer; }
#site-table td.fn { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12.5px; word-break: break-all; max-width: 520px; }
#site-table td.loc { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12.5px; word-break: break-all; max-width: 360px; }
tr.detail-row td { background: var(--panel); font-size: 12.5px; }
tr.detail-row pre { margin: 0; white-space: pre-wrap; word-break: break-all; }
.controls { display: flex; flex-wrap: wrap; gap: 10px 16px; align-items: center; margin: 6px 0 10px; }
.controls input[type=search] { width: 320px; padding: 5px 8px; }
.controls input[type=number] { width: 110px; padding: 5px 8px; }
#site-count { font-weight: 600; }
.legend span { display: inline-block; margin-right: 14px; color: var(--muted); }
.legend i { display: inline-block; width: 10px; height: 10px; margin-right: 4px; vertical-align: -1px; }
.note { color: var(--muted); font-size: 12.5px; }
)ATQ";

inline constexpr std::string_view script = R"ATQ(
(function () {
'use strict';
var D = JSON.parse(document.getElementById('report-data').textContent);
var SVG = 'http://www.w3.org/2000/svg';
function $(id) { return document.getElementById(id); }
function fmtInt(n) { return Number(n).toLocaleString('en-US'); }
function fmtBytes(n) {
  var u = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'], i = 0, v = Number(n);
  if (v < 1024) return v + ' B';
  while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
  return v.toFixed(v < 10 ? 2 : v < 100 ? 1 : 0) + ' ' + u[i];
}
function fmtNs(ns) {
  if (ns === null || ns === undefined) return '\u2013';
  if (ns < 1e3) return Math.round(ns) + ' ns';
  if (ns < 1e6) return (ns / 1e3).toFixed(ns < 1e4 ? 2 : 1) + ' \u00b5s';
  if (ns < 1e9) return (ns / 1e6).toFixed(ns < 1e7 ? 2 : 1) + ' ms';
  return (ns / 1e9).toFixed(3) + ' s';
}
function pct(a, b) { return b ? (100 * a / b).toFixed(1) + '%' : '0.0%'; }
function h(tag, text, cls) {
  var e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}
function s(tag, attrs, parent, text) {
  var e = document.createElementNS(SVG, tag);
  for (var k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}
function niceStep(max, n) {
  if (!(max > 0)) return 1;
  var raw = max / n, mag = Math.pow(10, Math.floor(Math.log10(raw))), r = raw / mag;
  return (r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10) * mag;
}
// Steps of 1, 2, 5, 10... KiB/MiB/GiB for byte axes, so labels stay round.
function byteStep(max, n) {
  var unit = 1;
  while (max / unit >= 1024 * 2) unit *= 1024;
  return Math.max(1, niceStep(max / unit, n)) * unit;
}

// --- header and overview ---------------------------------------------------
var P = D.process, T = D.totals, K = D.peak, L = D.life, S = D.small;
document.title = D.title;
$('title').textContent = D.title;
$('subtitle').textContent = [P.exe + (P.args.length ? ' \u2014 ' + P.args.join(' ') : ''),
  'pid ' + P.pid, fmtInt(P.events) + ' events', 'trace ' + D.trace].join(' \u00b7 ');
if (!P.complete || P.dropped) {
  var w = $('warnings');
  if (!P.complete) w.appendChild(h('div', 'Truncated trace: ' + P.truncation, 'warn'));
  if (P.dropped) w.appendChild(h('div', fmtInt(P.dropped) + ' events were dropped by the tracer.', 'warn'));
}
function card(k, v, d) {
  var c = h('div', null, 'card');
  c.appendChild(h('div', k, 'k')); c.appendChild(h('div', v, 'v'));
  if (d) c.appendChild(h('div', d, 'd'));
  $('overview').appendChild(c);
}
function opsText(o) { var r = []; for (var k in o) r.push(k + ' ' + fmtInt(o[k])); return r.join(', '); }
card('Duration', fmtNs(P.duration_ns), fmtInt(P.events) + ' events');
card('Allocations', fmtInt(T.allocations), opsText(T.alloc_ops));
card('Frees', fmtInt(T.frees), opsText(T.free_ops) + (T.null_frees ? '; not counted: ' + fmtInt(T.null_frees) + ' of NULL' : ''));
card('Bytes requested', fmtBytes(T.bytes), 'mean ' + (T.allocations ? (T.bytes / T.allocations).toFixed(1) : '0') + ' B');
card('Peak live bytes', fmtBytes(K.bytes), 'at ' + fmtNs(K.bytes_time_ns) + ', ' + fmtInt(K.bytes_objects) + ' objects');
card('Peak live objects', fmtInt(K.objects), 'at ' + fmtNs(K.objects_time_ns));
card('Never freed', fmtInt(K.never_freed), fmtBytes(K.never_freed_bytes));
card('\u2264 64 B', pct(S.le64, T.allocations), 'of allocations; ' + pct(S.le64_bytes, T.bytes) + ' of bytes');
card('\u2264 256 B', pct(S.le256, T.allocations), 'of allocations; ' + pct(S.le256_bytes, T.bytes) + ' of bytes');
card('Short-lived', pct(L.short_ns_count, L.freed), 'freed within ' + fmtNs(L.short_ns) + '; ' +
     pct(L.short_allocs_count, L.freed) + ' before ' + L.short_allocs + ' more allocations');
card('Median lifetime', L.freed ? fmtNs(L.median_ns) : '\u2013', fmtInt(L.median_allocs) + ' allocations in between');
card('Reallocs', fmtInt(T.reallocs), 'from NULL ' + fmtInt(T.realloc_from_null) + ', in place ' + fmtInt(T.realloc_in_place) +
     ', moved ' + fmtInt(T.realloc_moved));
card('Anomalies', fmtInt(T.unknown_frees + T.failed + T.mismatched_frees + T.lost_frees),
     'unknown frees ' + fmtInt(T.unknown_frees) + ', failed ' + fmtInt(T.failed) + ', mismatched ' +
     fmtInt(T.mismatched_frees) + ', lost ' + fmtInt(T.lost_frees));
if (S.le64) $('small-note').textContent = 'The ' + fmtInt(S.le64) + ' allocations of \u2264 64 B request ' +
  fmtBytes(S.le64_bytes) + '; glibc malloc would hold them in about ' + fmtBytes(S.le64_glibc_bytes) +
  ' of chunks (8-byte header, 16-byte granularity, 32-byte minimum) \u2014 the case for a small-object pool.';

// --- charts ----------------------------------------------------------------
function lineChart(svg, xs, ys, o) {
  var W = 900, H = 250, Lm = 74, Rm = 16, Tm = 18, Bm = 34;
  svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  var xmax = 1, ymax = 0, i;
  for (i = 0; i < xs.length; i++) xmax = Math.max(xmax, xs[i]);
  for (i = 0; i < ys.length; i++) ymax = Math.max(ymax, ys[i]);
  var ystep = (o.bytes ? byteStep : niceStep)(ymax || 1, 4), ytop = Math.max(ystep, Math.ceil((ymax || 1) / ystep) * ystep);
  var X = function (v) { return Lm + (W - Lm - Rm) * v / xmax; };
  var Y = function (v) { return H - Bm - (H - Tm - Bm) * v / ytop; };
  for (var yv = 0; yv <= ytop * 1.000001; yv += ystep) {
    s('line', { x1: Lm, x2: W - Rm, y1: Y(yv), y2: Y(yv), 'class': 'grid' }, svg);
    s('text', { x: Lm - 6, y: Y(yv) + 4, 'text-anchor': 'end' }, svg, o.yfmt(yv));
  }
  var xstep = niceStep(xmax, 7);
  for (var xv = 0; xv <= xmax * 1.000001; xv += xstep) {
    s('line', { x1: X(xv), x2: X(xv), y1: H - Bm, y2: H - Bm + 4, 'class': 'axis' }, svg);
    s('text', { x: X(xv), y: H - Bm + 16, 'text-anchor': 'middle' }, svg, fmtNs(xv));
  }
  s('line', { x1: Lm, x2: W - Rm, y1: H - Bm, y2: H - Bm, 'class': 'axis' }, svg);
  s('line', { x1: Lm, x2: Lm, y1: Tm, y2: H - Bm, 'class': 'axis' }, svg);
  s('text', { x: W - Rm, y: H - 4, 'text-anchor': 'end' }, svg, 'time since start');
  if (!xs.length) return;
  var d = 'M' + X(xs[0]).toFixed(1) + ' ' + Y(ys[0]).toFixed(1), pk = 0;
  for (i = 1; i < xs.length; i++) {
    d += 'H' + X(xs[i]).toFixed(1) + 'V' + Y(ys[i]).toFixed(1);
    if (ys[i] > ys[pk]) pk = i;
  }
  d += 'H' + X(xmax).toFixed(1);
  s('path', { d: d + 'V' + Y(0).toFixed(1) + 'H' + X(xs[0]).toFixed(1) + 'Z', 'class': 'area ' + (o.cls || '') }, svg);
  s('path', { d: d, 'class': 'line ' + (o.cls || '') }, svg);
  if (ys[pk] > 0) {
    s('circle', { cx: X(xs[pk]), cy: Y(ys[pk]), r: 4, 'class': 'peak' }, svg);
    var right = X(xs[pk]) > W * 0.7;
    s('text', { x: X(xs[pk]) + (right ? -8 : 8), y: Math.max(Tm + 10, Y(ys[pk]) + 4), 'class': 'peak-label',
                'text-anchor': right ? 'end' : 'start' }, svg, 'peak ' + o.yfmt(ys[pk]) + ' at ' + fmtNs(xs[pk]));
  }
  var cur = s('line', { x1: 0, x2: 0, y1: Tm, y2: H - Bm, 'class': 'cursor', visibility: 'hidden' }, svg);
  var lab = s('text', { x: 0, y: Tm + 2, 'class': 'cursor-label', visibility: 'hidden' }, svg);
  var hit = s('rect', { x: Lm, y: Tm, width: W - Lm - Rm, height: H - Tm - Bm, fill: 'transparent' }, svg);
  hit.addEventListener('mousemove', function (ev) {
    var box = svg.getBoundingClientRect(), px = (ev.clientX - box.left) * W / box.width;
    var t = (px - Lm) / (W - Lm - Rm) * xmax, lo = 0, hi = xs.length - 1;
    while (lo < hi) { var mid = (lo + hi + 1) >> 1; if (xs[mid] <= t) lo = mid; else hi = mid - 1; }
    cur.setAttribute('x1', px); cur.setAttribute('x2', px); cur.setAttribute('visibility', 'visible');
    lab.textContent = fmtNs(Math.max(0, t)) + ': ' + o.yfmt(ys[lo]);
    lab.setAttribute('x', px > W * 0.7 ? px - 6 : px + 6);
    lab.setAttribute('text-anchor', px > W * 0.7 ? 'end' : 'start');
    lab.setAttribute('visibility', 'visible');
  });
  hit.addEventListener('mouseleave', function () {
    cur.setAttribute('visibility', 'hidden'); lab.setAttribute('visibility', 'hidden');
  });
}

function barChart(svg, labels, series, o) {
  var n = labels.length, rotate = n > 8;
  var W = o.width || 900, H = (o.height || 250) + (rotate ? 30 : 0), Lm = 46, Rm = 10, Tm = 14, Bm = rotate ? 76 : 40;
  svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  var ymax = 0, i, j;
  for (j = 0; j < series.length; j++) for (i = 0; i < n; i++) ymax = Math.max(ymax, series[j].values[i]);
  var ystep = niceStep(ymax || 1, 4), ytop = Math.max(ystep, Math.ceil((ymax || 1) / ystep) * ystep);
  var Y = function (v) { return H - Bm - (H - Tm - Bm) * v / ytop; };
  for (var yv = 0; yv <= ytop * 1.000001; yv += ystep) {
    s('line', { x1: Lm, x2: W - Rm, y1: Y(yv), y2: Y(yv), 'class': 'grid' }, svg);
    s('text', { x: Lm - 6, y: Y(yv) + 4, 'text-anchor': 'end' }, svg, o.yfmt(yv));
  }
  s('line', { x1: Lm, x2: W - Rm, y1: H - Bm, y2: H - Bm, 'class': 'axis' }, svg);
  if (!n) { s('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle' }, svg, 'no data'); return; }
  var slot = (W - Lm - Rm) / n, bw = Math.max(1, slot * 0.8 / series.length);
  for (i = 0; i < n; i++) {
    for (j = 0; j < series.length; j++) {
      var v = series[j].values[i], x = Lm + slot * i + slot * 0.1 + bw * j;
      var r = s('rect', { x: x, y: Y(v), width: bw, height: Math.max(0, Y(0) - Y(v)), 'class': series[j].cls }, svg);
      s('title', {}, r, labels[i] + ': ' + series[j].name + ' ' + series[j].tip(i));
    }
    if (n <= 32 || i % Math.ceil(n / 32) === 0) {
      var lx = Lm + slot * (i + 0.5), ly = H - Bm + 14;
      if (rotate) s('text', { x: lx + 3, y: ly - 4, 'text-anchor': 'end', transform: 'rotate(-40 ' + lx + ' ' + ly + ')' }, svg, labels[i]);
      else s('text', { x: lx, y: ly, 'text-anchor': 'middle' }, svg, labels[i]);
    }
  }
  if (o.xlabel) s('text', { x: W - Rm, y: H - 6, 'text-anchor': 'end' }, svg, o.xlabel);
}

var ser = D.series;
lineChart($('live-chart'), ser.t, ser.b, { yfmt: fmtBytes, bytes: true });
lineChart($('objects-chart'), ser.t, ser.o, { yfmt: fmtInt, cls: 'obj' });
$('series-note').textContent = ser.t.length + ' points' +
  (ser.t.length < P.events ? ' (downsampled from ' + fmtInt(P.events) + ' events; each interval keeps its maximum)' : '');

function sizeLabel(b) { return b.lo === b.hi ? String(b.hi) : b.lo + '\u2013' + b.hi; }
var hist = D.hist;
barChart($('size-chart'), hist.map(sizeLabel), [
  { name: 'allocations', cls: 'bar1', values: hist.map(function (b) { return T.allocations ? 100 * b.count / T.allocations : 0; }),
    tip: function (i) { return fmtInt(hist[i].count) + ' (' + pct(hist[i].count, T.allocations) + ')'; } },
  { name: 'bytes', cls: 'bar2', values: hist.map(function (b) { return T.bytes ? 100 * b.bytes / T.bytes : 0; }),
    tip: function (i) { return fmtBytes(hist[i].bytes) + ' (' + pct(hist[i].bytes, T.bytes) + ')'; } }
], { yfmt: function (v) { return v.toFixed(0) + '%'; }, xlabel: 'size (bytes)', width: 600, height: 300 });

function lifeLabelNs(b) { return b.hi === null ? '\u2265 ' + fmtNs(b.lo) : '< ' + fmtNs(b.hi); }
function lifeLabelAllocs(b) { return b.hi === null ? '\u2265' + b.lo : (b.hi === b.lo + 1 ? String(b.lo) : b.lo + '\u2013' + (b.hi - 1)); }
function lifeChart(svg, buckets, label, xlabel) {
  barChart(svg, buckets.map(label), [{ name: 'objects', cls: 'bar1',
    values: buckets.map(function (b) { return L.freed ? 100 * b.count / L.freed : 0; }),
    tip: function (i) { return fmtInt(buckets[i].count) + ' (' + pct(buckets[i].count, L.freed) + ')'; } }],
    { yfmt: function (v) { return v.toFixed(0) + '%'; }, xlabel: xlabel, width: 600, height: 260 });
}
lifeChart($('lifetime-chart'), L.ns, lifeLabelNs, 'lifetime');
var lastUsed = 0;
L.allocs.forEach(function (b, i) { if (b.count) lastUsed = i; });
lifeChart($('between-chart'), L.allocs.slice(0, Math.max(lastUsed + 1, 8)), lifeLabelAllocs, 'allocations in between');

function fillTable(tbody, rows) {
  rows.forEach(function (r) {
    var tr = document.createElement('tr');
    r.forEach(function (c, i) { tr.appendChild(h('td', c, i ? 'num' : '')); });
    tbody.appendChild(tr);
  });
}
fillTable($('size-table').tBodies[0], D.top_sizes.slice(0, 12).map(function (c) {
  return [String(c.size), fmtInt(c.count), pct(c.count, T.allocations)];
}));
fillTable($('thread-table').tBodies[0], D.threads.map(function (t) {
  return [String(t.thread), String(t.tid), fmtInt(t.events), fmtInt(t.allocations), fmtBytes(t.bytes), fmtInt(t.frees)];
}));

// --- the call-site table ---------------------------------------------------
var SITES = D.sites;
SITES.forEach(function (x) {
  x.q = [x.fn, x.loc, x.file, x.module, x.mloc, x.inl, x.addr].join('\n').toLowerCase();
});
var COLS = [
  { key: 'rank', label: '#', num: true, get: function (x) { return x.rank; }, show: function (x) { return String(x.rank); } },
  { key: 'fn', label: 'Function', num: false, cls: 'fn', get: function (x) { return x.fn; },
    show: function (x) { return x.fn || '?'; } },
  { key: 'loc', label: 'Location', num: false, cls: 'loc', get: function (x) { return x.loc; },
    show: function (x) { return x.loc; } },
  { key: 'count', label: 'Count', num: true, get: function (x) { return x.count; },
    show: function (x) { return fmtInt(x.count); } },
  { key: 'bytes', label: 'Bytes', num: true, get: function (x) { return x.bytes; },
    show: function (x) { return fmtBytes(x.bytes); } },
  { key: 'peak', label: 'Peak live', num: true, get: function (x) { return x.peak; },
    show: function (x) { return fmtBytes(x.peak); } },
  { key: 'mean', label: 'Mean size', num: true, get: function (x) { return x.mean; },
    show: function (x) { return x.mean.toFixed(1); } },
  { key: 'size', label: 'Sizes', num: true, get: function (x) { return x.min; },
    show: function (x) { return x.min === x.max ? String(x.min) : x.min + '\u2013' + x.max + ' (' + x.nsizes + ')'; } },
  { key: 'life', label: 'Median lifetime', num: true, get: function (x) { return x.life === null ? Infinity : x.life; },
    show: function (x) { return x.life === null ? 'never freed' : fmtNs(x.life); } },
  { key: 'leak', label: 'Never freed', num: true, get: function (x) { return x.leak; },
    show: function (x) { return fmtInt(x.leak); } }
];
var state = { key: 'count', dir: -1 };
var table = $('site-table'), thead = table.tHead, tbody = table.tBodies[0];
var hr = document.createElement('tr');
COLS.forEach(function (c) {
  var th = h('th', c.label, c.num ? 'num' : '');
  th.setAttribute('data-key', c.key);
  th.setAttribute('title', 'sort by ' + c.label.toLowerCase() + ' (click again to reverse)');
  th.addEventListener('click', function () {
    if (state.key === c.key) state.dir = -state.dir;
    else { state.key = c.key; state.dir = c.num ? -1 : 1; }
    render();
  });
  hr.appendChild(th);
});
thead.appendChild(hr);

function readNum(id) {
  var v = $(id).value.trim();
  if (v === '') return null;
  var n = Number(v);
  return isFinite(n) ? n : null;
}
// A site matches the size range if it allocated at least one object of a size
// in [min, max] (exact for its listed sizes; by its min..max otherwise).
function sizeMatch(x, lo, hi) {
  if (lo === null && hi === null) return true;
  var a = lo === null ? -Infinity : lo, b = hi === null ? Infinity : hi;
  for (var i = 0; i < x.sizes.length; i++) if (x.sizes[i][0] >= a && x.sizes[i][0] <= b) return true;
  return x.more && x.max >= a && x.min <= b;
}
function visibleSites() {
  var q = $('site-filter').value.trim().toLowerCase(), lo = readNum('size-min'), hi = readNum('size-max');
  return SITES.filter(function (x) { return (!q || x.q.indexOf(q) >= 0) && sizeMatch(x, lo, hi); });
}
function detail(x) {
  var lines = [
    'address      ' + x.addr + (x.module ? '   (' + x.mloc + ')' : ''),
    'module       ' + (x.module || '(unknown)'),
    'function     ' + (x.fn || '(unknown)'),
    'location     ' + x.loc
  ];
  if (x.inl) lines.push('inlined into ' + x.inl);
  lines.push('operations   ' + x.ops);
  lines.push('objects      ' + fmtInt(x.count) + ' allocated, ' + fmtInt(x.freed) + ' freed, ' + fmtInt(x.leak) +
             ' never freed (' + fmtBytes(x.leak_bytes) + ')' + (x.failed ? ', ' + fmtInt(x.failed) + ' failed' : ''));
  lines.push('sizes        ' + x.sizes.map(function (p) { return p[0] + ' B \u00d7' + fmtInt(p[1]); }).join(', ') +
             (x.more ? ', \u2026 (' + x.nsizes + ' distinct)' : ''));
  var td = h('td'); td.colSpan = COLS.length;
  td.appendChild(h('pre', lines.join('\n')));
  var tr = document.createElement('tr'); tr.className = 'detail-row'; tr.appendChild(td);
  return tr;
}
function render() {
  var rows = visibleSites(), col = COLS.filter(function (c) { return c.key === state.key; })[0], dir = state.dir;
  rows.sort(function (a, b) {
    var x = col.get(a), y = col.get(b);
    if (!col.num) { x = x.toLowerCase(); y = y.toLowerCase(); }
    if (x < y) return -dir;
    if (x > y) return dir;
    return a.id - b.id;
  });
  var frag = document.createDocumentFragment();
  rows.forEach(function (x) {
    var tr = document.createElement('tr');
    tr.className = 'site-row';
    tr.setAttribute('data-id', x.id);
    COLS.forEach(function (c) {
      var td = h('td', c.show(x), (c.num ? 'num ' : '') + (c.cls || ''));
      td.setAttribute('data-key', c.key);
      var v = c.get(x);
      td.setAttribute('data-value', v === Infinity ? 'Infinity' : String(v));
      if (c.key === 'fn' && x.inl) td.title = 'inlined into ' + x.inl;
      tr.appendChild(td);
    });
    tr.addEventListener('click', function () {
      var next = tr.nextSibling;
      if (next && next.className === 'detail-row') tbody.removeChild(next);
      else tbody.insertBefore(detail(x), next);
    });
    frag.appendChild(tr);
  });
  while (tbody.firstChild) tbody.removeChild(tbody.firstChild);
  tbody.appendChild(frag);
  Array.prototype.forEach.call(thead.querySelectorAll('th'), function (th) {
    if (th.getAttribute('data-key') === state.key) th.setAttribute('aria-sort', dir < 0 ? 'descending' : 'ascending');
    else th.removeAttribute('aria-sort');
  });
  $('site-count').textContent = rows.length + ' of ' + SITES.length + ' sites';
}
['site-filter', 'size-min', 'size-max'].forEach(function (id) { $(id).addEventListener('input', render); });
$('filter-reset').addEventListener('click', function () {
  $('site-filter').value = ''; $('size-min').value = ''; $('size-max').value = ''; render();
});
if (D.threads_total > D.threads.length)
  $('threads-note').textContent = 'The page holds the ' + fmtInt(D.threads.length) + ' of ' + fmtInt(D.threads_total) +
    ' threads with the most events.';
if (D.sites_total > SITES.length)
  $('sites-note').textContent = 'The page holds ' + fmtInt(SITES.length) + ' of ' + fmtInt(D.sites_total) +
    ' call sites: the most frequent and the largest by bytes.';
render();
document.body.setAttribute('data-ready', '1');
})();
)ATQ";

} // namespace html

inline std::string html_report(const summary& s, const std::vector<symbol>& syms, const html_options& opt) {
    std::string o;
    o.reserve(64 * 1024 + s.sites.size() * 400 + s.series.size() * 40);
    o += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
         "<meta name=\"generator\" content=\"allotheque-trace summary\">\n"
         "<link rel=\"icon\" href=\"data:,\">\n<title>";
    o += html::escape(opt.title);
    o += "</title>\n<style>";
    o += html::style;
    o += "</style>\n</head>\n<body>\n<h1 id=\"title\">";
    o += html::escape(opt.title);
    o += R"ATQ(</h1>
<p class="sub" id="subtitle"></p>
<noscript><p class="warn">This report draws its tables and charts with JavaScript; the data is in the
report-data script element (JSON).</p></noscript>
<div id="warnings"></div>
<section id="overview-section"><h2>Overview</h2><div class="cards" id="overview"></div>
<p class="note" id="small-note"></p></section>
<section id="memory-section"><h2>Live memory over time</h2>
<div class="legend"><span><i style="background:#2563c9"></i>live bytes</span></div>
<svg class="chart" id="live-chart" role="img" aria-label="live bytes over time"></svg>
<div class="legend" style="margin-top:8px"><span><i style="background:#2f9e44"></i>live objects</span></div>
<svg class="chart" id="objects-chart" role="img" aria-label="live objects over time"></svg>
<p class="note" id="series-note"></p></section>
<section id="sizes-section"><h2>Sizes</h2>
<div class="legend"><span><i style="background:#2563c9"></i>% of allocations</span><span><i style="background:#f59f00"></i>% of bytes</span></div>
<div class="row2"><div><svg class="chart" id="size-chart" role="img" aria-label="size histogram"></svg></div>
<div><table class="small" id="size-table"><caption class="note" style="text-align:left">most frequent exact sizes</caption><thead><tr><th class="num">size (B)</th><th class="num">count</th><th class="num">% of allocations</th></tr></thead><tbody></tbody></table></div></div>
</section>
<section id="lifetime-section"><h2>Object lifetimes (freed objects)</h2>
<div class="row2"><div><svg class="chart" id="lifetime-chart" role="img" aria-label="lifetimes in time"></svg></div>
<div><svg class="chart" id="between-chart" role="img" aria-label="lifetimes in allocations"></svg></div></div>
</section>
<section id="threads-section"><h2>Threads</h2>
<table class="small" id="thread-table"><thead><tr><th class="num">thread</th><th class="num">os tid</th><th class="num">events</th><th class="num">allocations</th><th class="num">bytes</th><th class="num">frees</th></tr></thead><tbody></tbody></table>
<p class="note" id="threads-note"></p>
</section>
<section id="sites-section"><h2>Call sites</h2>
<div class="controls">
<label>Filter <input type="search" id="site-filter" placeholder="function, file or module" autocomplete="off"></label>
<label>Size from <input type="number" id="size-min" min="0" placeholder="min B"></label>
<label>to <input type="number" id="size-max" min="0" placeholder="max B"></label>
<button type="button" id="filter-reset">Reset</button>
<span id="site-count"></span>
</div>
<p class="note">Click a column header to sort (again to reverse); click a row for details. The size filter keeps sites that allocated at least one object of a size in the range.</p>
<p class="note" id="sites-note"></p>
<table id="site-table"><thead></thead><tbody></tbody></table>
</section>
<script type="application/json" id="report-data">)ATQ";
    o += html::report_json(s, syms, opt);
    o += "</script>\n<script>";
    o += html::script;
    o += "</script>\n</body>\n</html>\n";
    return o;
}

} // namespace allotheque::tools

#endif
