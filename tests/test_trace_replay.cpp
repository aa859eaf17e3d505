// Replay planning (tools/trace/replay_plan.hpp): the op sequence a trace
// becomes, the neighbour hints (nearest live object below in the traced
// address space, else above), realloc, anomalies (unknown and NULL frees,
// failed allocations, lost frees, objects never freed), slot reuse, the peak of
// live requested and touched bytes, determinism, and the plan file's checks.
// And the ranking (replay_rank.hpp): medians, scores, and "no clear winner"
// when the runs' spread says the leaders are within the noise. And the rows
// (replay_rows.hpp): the C++ a recommendation prints names types that exist
// and are what it says (a malloc heap, a shipped library's), the malloc rows
// are the shipped libraries, and the LD_PRELOAD line pastes into a shell.
#include <allotheque/allocator.hpp>
#include <allotheque/allocators/defero.hpp>
#include <allotheque/allocators/kingsley_coalescing.hpp>
#include <allotheque/malloc/shipped.hpp>
#include <allotheque/trace/builder.hpp>
#include <allotheque/trace/objects.hpp>
#include <allotheque/trace/reader.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include "catch.hpp"
#include "process_memory.hpp"
#include "replay_plan.hpp"
#include "replay_rank.hpp"
#include "replay_rows.hpp"

namespace tr = allotheque::trace;
namespace rp = allotheque::tools::replay;

namespace {

rp::plan plan_of(tr::builder& b) {
    const auto bytes = b.finish();
    return rp::make_plan(tr::parse_trace(bytes));
}

// Replays the plan's slot bookkeeping: every op must be valid in order.
void check_all_ops(const rp::plan& p) {
    std::vector<bool> filled(p.slots, false);
    for (std::size_t i = 0; i < p.ops.size(); ++i) {
        INFO("op " << i);
        REQUIRE(rp::check_op(p.ops[i], filled).empty());
    }
}

struct mini {  // a few helpers over the builder, times increasing
    tr::builder b;
    std::uint64_t t = 100;
    mini& alloc(std::uint64_t a, std::uint64_t n, std::uint32_t align_log2 = 0) {
        b.add(align_log2 ? tr::op::aligned_alloc_ : tr::op::malloc_, t += 10, a, n, 0, 0, 0, align_log2);
        return *this;
    }
    mini& free(std::uint64_t a) {
        b.add(tr::op::free_, t += 10, a);
        return *this;
    }
    mini& realloc(std::uint64_t old, std::uint64_t a, std::uint64_t n) {
        b.add(tr::op::realloc_, t += 10, a, n, 0, 0, old);
        return *this;
    }
    mini& failed(std::uint64_t n) {
        b.add(tr::op::malloc_, t += 10, 0, n, 0, 0, 0, 0, true);
        return *this;
    }
};

} // namespace

TEST_CASE("replay plan: the hint is the live neighbour nearest below, else above", "[trace][replay]") {
    mini m;
    m.alloc(0x1000, 16)    // 0: A, nothing live: no hint
        .alloc(0x3000, 16) // 1: B, nearest below = A
        .alloc(0x2000, 16) // 2: C, between A and B: below = A
        .alloc(0x0800, 16) // 3: D, nothing below: above = A
        .free(0x1000)      // 4: A freed
        .alloc(0x2800, 16) // 5: E, below = C (A is gone)
        .alloc(0x0100, 16);// 6: F, nothing below: above = D
    const rp::plan p = plan_of(m.b);
    REQUIRE(p.ops.size() == 7);
    REQUIRE(p.objects == 6);
    // op -> (kind, object, hint object)
    const std::uint32_t none = rp::no_object;
    const struct { rp::op_kind k; std::uint32_t obj, hint; } want[] = {
        {rp::op_kind::alloc, 0, none}, {rp::op_kind::alloc, 1, 0}, {rp::op_kind::alloc, 2, 0},
        {rp::op_kind::alloc, 3, 0},    {rp::op_kind::free, 0, none}, {rp::op_kind::alloc, 4, 2},
        {rp::op_kind::alloc, 5, 3},
    };
    std::map<std::uint32_t, std::uint32_t> slot_of;  // object -> slot while live
    for (std::size_t i = 0; i < p.ops.size(); ++i) {
        INFO("op " << i);
        const rp::plan_op& o = p.ops[i];
        CHECK(o.kind == want[i].k);
        CHECK(o.object == want[i].obj);
        CHECK(p.aux[i] == want[i].hint);
        if (o.kind == rp::op_kind::alloc) {
            // The hint is carried as the hint object's slot.
            if (want[i].hint == none) CHECK(o.other == rp::no_slot);
            else CHECK(o.other == slot_of.at(want[i].hint));
            slot_of[o.object] = o.slot;
            CHECK(o.size == 16);
        } else {
            CHECK(o.slot == slot_of.at(o.object));
            slot_of.erase(o.object);
        }
    }
    CHECK(p.stats.allocs == 6);
    CHECK(p.stats.hinted == 5);
    CHECK(p.stats.frees == 1);
    CHECK(p.stats.never_freed == 5);
    check_all_ops(p);
}

TEST_CASE("replay plan: slots are reused LIFO, and count the peak of live objects", "[trace][replay]") {
    mini m;
    m.alloc(0x1000, 8).alloc(0x2000, 8).alloc(0x3000, 8);  // slots 0 1 2
    m.free(0x2000).free(0x1000);                           // frees slot 1, then 0
    m.alloc(0x4000, 8).alloc(0x5000, 8);                   // takes 0, then 1
    const rp::plan p = plan_of(m.b);
    REQUIRE(p.ops.size() == 7);
    CHECK(p.slots == 3);
    CHECK(p.ops[5].slot == 0);
    CHECK(p.ops[6].slot == 1);
    check_all_ops(p);
}

TEST_CASE("replay plan: realloc moves an object to a new slot, hinted by its old block", "[trace][replay]") {
    mini m;
    m.alloc(0x1000, 16)              // 0: A
        .alloc(0x2000, 32)           // 1: B
        .realloc(0x1000, 0x9000, 64) // 2: A -> A' (moved)
        .realloc(0x9000, 0x9000, 80) // 3: A' -> A'' (in place: not a lost free)
        .realloc(0, 0x7000, 24)      // 4: realloc(NULL, 24) = an allocation
        .realloc(0x2000, 0, 0)       // 5: realloc(B, 0) returning NULL = a free
        .free(0x9000);               // 6: A'' freed
    const rp::plan p = plan_of(m.b);
    REQUIRE(p.ops.size() == 7);
    const auto& r1 = p.ops[2];
    CHECK(r1.kind == rp::op_kind::realloc);
    CHECK(r1.slot == p.ops[0].slot);   // the old object's slot
    CHECK(r1.other != r1.slot);        // both live during the copy
    CHECK(r1.object == 2);
    CHECK(p.aux[2] == 0);              // old object id
    CHECK(r1.size == 64);
    const auto& r2 = p.ops[3];
    CHECK(r2.kind == rp::op_kind::realloc);
    CHECK(r2.slot == r1.other);
    CHECK(r2.object == 3);
    CHECK(p.aux[3] == 2);
    CHECK(r2.size == 80);
    CHECK(p.stats.lost_frees == 0);
    CHECK(p.ops[4].kind == rp::op_kind::alloc);
    CHECK(p.ops[4].size == 24);
    CHECK(p.aux[4] == 1);              // nearest live below 0x7000: B at 0x2000
    CHECK(p.ops[5].kind == rp::op_kind::free);
    CHECK(p.ops[5].object == 1);
    CHECK(p.ops[5].size == 32);
    CHECK(p.ops[6].kind == rp::op_kind::free);
    CHECK(p.ops[6].slot == r2.other);
    CHECK(p.ops[6].object == 3);
    CHECK(p.stats.reallocs == 2);
    CHECK(p.stats.allocs == 3);
    CHECK(p.stats.frees == 2);
    CHECK(p.stats.never_freed == 1);
    // Live bytes: 16, 48, 96 (A' 64 + B 32), 112 (A'' 80 + B), 136, 104, 24.
    CHECK(p.peak_requested_bytes == 136);
    check_all_ops(p);
}

TEST_CASE("replay plan: unknown and NULL frees are ignored, failed allocations skipped", "[trace][replay]") {
    mini m;
    m.alloc(0x1000, 100).free(0x5555).failed(std::uint64_t(1) << 45).free(0).alloc(0x2000, 50).free(0x1000);
    m.b.add(tr::op::delete_, m.t += 10, 0x1000);  // double free: the address is no longer live
    const rp::plan p = plan_of(m.b);
    REQUIRE(p.ops.size() == 3);
    CHECK(p.ops[0].kind == rp::op_kind::alloc);
    CHECK(p.ops[1].kind == rp::op_kind::alloc);
    CHECK(p.ops[1].size == 50);
    CHECK(p.ops[2].kind == rp::op_kind::free);
    CHECK(p.ops[2].object == 0);
    CHECK(p.stats.unknown_frees == 2);
    CHECK(p.stats.null_frees == 1);
    CHECK(p.stats.failed == 1);
    CHECK(p.stats.events == 7);
    CHECK(p.peak_requested_bytes == 150);
    check_all_ops(p);
}

TEST_CASE("replay plan: an allocation at a live address frees the older object first", "[trace][replay]") {
    mini m;
    m.alloc(0x1000, 16).alloc(0x1000, 24);  // the free in between was lost
    const rp::plan p = plan_of(m.b);
    REQUIRE(p.ops.size() == 3);
    CHECK(p.ops[1].kind == rp::op_kind::free);
    CHECK(p.ops[1].object == 0);
    CHECK(p.ops[2].kind == rp::op_kind::alloc);
    CHECK(p.ops[2].object == 1);
    CHECK(p.aux[2] == rp::no_object);  // the older object is gone: nothing live
    CHECK(p.stats.lost_frees == 1);
    CHECK(p.stats.never_freed == 1);
    CHECK(p.peak_requested_bytes == 24);
    check_all_ops(p);
}

TEST_CASE("replay plan: alignment, operator new/delete, threads in time order", "[trace][replay]") {
    tr::builder b;
    b.add(tr::op::new_, 10, 0x1000, 40, 0, 0);
    b.add(tr::op::memalign_, 30, 0x2000, 100, 0, 1, 0, 6);  // thread 1, 64-byte aligned
    b.add(tr::op::new_array, 20, 0x3000, 80, 0, 0);          // thread 0, earlier than thread 1's event
    b.add(tr::op::delete_, 40, 0x1000, 40, 0, 0, 0, 0, false, true);
    const rp::plan p = rp::make_plan(tr::parse_trace(b.finish()));
    REQUIRE(p.ops.size() == 4);
    CHECK(p.ops[1].size == 80);   // time order, not block order
    CHECK(p.ops[2].size == 100);
    CHECK(p.ops[2].align_log2 == 6);
    CHECK(p.aux[2] == 0);         // nearest below 0x2000: the object at 0x1000
    CHECK(p.ops[3].kind == rp::op_kind::free);
    CHECK(p.ops[3].object == 0);
    CHECK(p.stats.threads == 2);
    CHECK(p.stats.aligned == 1);
}

TEST_CASE("replay plan: planning is deterministic and every op is valid", "[trace][replay]") {
    // A random workload over a simulated address space.
    auto make = [] {
        tr::builder b;
        std::mt19937_64 rng(7);
        std::vector<std::uint64_t> live;
        std::uint64_t t = 1, next = 0x10000;
        for (int i = 0; i < 20000; ++i) {
            const auto r = rng() % 10;
            if (!live.empty() && r < 4) {
                const std::size_t k = rng() % live.size();
                b.add(tr::op::free_, ++t, live[k]);
                live[k] = live.back();
                live.pop_back();
            } else if (!live.empty() && r == 4) {
                const std::size_t k = rng() % live.size();
                const std::uint64_t a = rng() % 2 ? live[k] : (next += 512);
                b.add(tr::op::realloc_, ++t, a, rng() % 300, 0, 0, live[k]);
                live[k] = a;
            } else {
                // Reuse a recently freed-looking address sometimes: lost frees.
                const std::uint64_t a = rng() % 50 == 0 && !live.empty() ? live[rng() % live.size()] : (next += 256);
                b.add(tr::op::malloc_, ++t, a, rng() % 200);
                if (std::find(live.begin(), live.end(), a) == live.end()) live.push_back(a);
            }
        }
        return b.finish();
    };
    const auto bytes = make();
    const rp::plan p1 = rp::make_plan(tr::parse_trace(bytes));
    const rp::plan p2 = rp::make_plan(tr::parse_trace(make()));
    REQUIRE(p1.ops.size() == p2.ops.size());
    REQUIRE(std::memcmp(p1.ops.data(), p2.ops.data(), p1.ops.size() * sizeof(rp::plan_op)) == 0);
    CHECK(p1.aux == p2.aux);
    CHECK(p1.peak_requested_bytes == p2.peak_requested_bytes);
    CHECK(p1.stats.lost_frees > 0);
    CHECK(p1.slots < p1.objects);
    check_all_ops(p1);

    // Every op's hint is the nearest live neighbour, recomputed naively.
    const auto t = tr::parse_trace(bytes);
    const auto tl = tr::resolve(t);
    std::map<std::uint64_t, std::uint32_t> live;
    std::size_t k = 0;
    for (std::size_t i = 0; i < p1.ops.size(); ++i) {
        const auto& o = p1.ops[i];
        if (o.kind == rp::op_kind::free) {
            live.erase(tl.objects[o.object].address);
            continue;
        }
        if (o.kind == rp::op_kind::realloc) {
            live.erase(tl.objects[p1.aux[i]].address);
            live[tl.objects[o.object].address] = o.object;
            continue;
        }
        const std::uint64_t a = tl.objects[o.object].address;
        // Linear scan: the highest live address below, else the lowest above.
        std::uint32_t below = rp::no_object, above = rp::no_object;
        std::uint64_t below_addr = 0, above_addr = 0;
        for (const auto& [addr, id] : live) {
            if (addr < a && (below == rp::no_object || addr > below_addr)) below = id, below_addr = addr;
            if (addr > a && (above == rp::no_object || addr < above_addr)) above = id, above_addr = addr;
        }
        const std::uint32_t ref = below != rp::no_object ? below : above;
        CHECK(p1.aux[i] == ref);
        live[a] = o.object;
        ++k;
    }
    CHECK(k == p1.stats.allocs);
}

TEST_CASE("replay plan: the plan file round-trips and damaged plans are rejected", "[trace][replay]") {
    mini m;
    m.alloc(0x1000, 16).alloc(0x2000, 16).realloc(0x1000, 0x3000, 64).free(0x2000);
    const rp::plan p = plan_of(m.b);
    const std::string path = "test_trace_replay.plan";
    rp::write_plan(p, path);
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    REQUIRE(in);
    const auto size = std::uint64_t(in.tellg());
    in.seekg(0);
    std::vector<char> bytes(size);
    in.read(bytes.data(), std::streamsize(size));
    std::remove(path.c_str());
    REQUIRE(size == sizeof(rp::plan_header) + p.ops.size() * sizeof(rp::plan_op));
    rp::plan_header h;
    std::memcpy(&h, bytes.data(), sizeof h);
    CHECK(rp::check_header(h, size).empty());
    CHECK(h.ops == p.ops.size());
    CHECK(h.slots == p.slots);
    CHECK(h.objects == p.objects);
    CHECK(h.peak_requested_bytes == p.peak_requested_bytes);
    CHECK(std::memcmp(bytes.data() + sizeof h, p.ops.data(), p.ops.size() * sizeof(rp::plan_op)) == 0);

    CHECK_FALSE(rp::check_header(h, size - 1).empty());     // cut
    CHECK_FALSE(rp::check_header(h, size + 24).empty());    // extra op
    CHECK_FALSE(rp::check_header(h, 10).empty());           // shorter than the header
    rp::plan_header bad = h;
    bad.magic[0] = 'X';
    CHECK_FALSE(rp::check_header(bad, size).empty());
    CHECK(h.peak_touched_bytes == p.peak_touched_bytes);
    CHECK(h.touch_limit == rp::default_touch_limit);
    bad = h;
    bad.version = 1;  // before the touch limit
    CHECK_FALSE(rp::check_header(bad, size).empty());
    bad = h;
    bad.ops = ~0ull / 2;
    CHECK_FALSE(rp::check_header(bad, size).empty());

    // Ops that do not fit the slot occupancy.
    std::vector<bool> filled(2, false);
    rp::plan_op free_empty{rp::op_kind::free, 0, 0, 0, rp::no_slot, 0, 0};
    CHECK_FALSE(rp::check_op(free_empty, filled).empty());
    rp::plan_op hint_empty{rp::op_kind::alloc, 0, 0, 0, 1, 0, 8};
    CHECK_FALSE(rp::check_op(hint_empty, filled).empty());
    rp::plan_op out_of_range{rp::op_kind::alloc, 0, 0, 5, rp::no_slot, 0, 8};
    CHECK_FALSE(rp::check_op(out_of_range, filled).empty());
    rp::plan_op ok{rp::op_kind::alloc, 0, 0, 0, rp::no_slot, 0, 8};
    CHECK(rp::check_op(ok, filled).empty());
    CHECK_FALSE(rp::check_op(ok, filled).empty());  // slot 0 now used
    rp::plan_op realloc_into_used{rp::op_kind::realloc, 0, 0, 0, 0, 0, 8};
    CHECK_FALSE(rp::check_op(realloc_into_used, filled).empty());
    rp::plan_op bad_kind{rp::op_kind(9), 0, 0, 0, rp::no_slot, 0, 8};
    CHECK_FALSE(rp::check_op(bad_kind, filled).empty());
}

TEST_CASE("replay plan: an empty trace plans to nothing", "[trace][replay]") {
    tr::builder b;
    const rp::plan p = rp::make_plan(tr::parse_trace(b.finish()));
    CHECK(p.ops.empty());
    CHECK(p.slots == 0);
    CHECK(p.objects == 0);
    CHECK(p.peak_requested_bytes == 0);
}

TEST_CASE("replay plan: a huge, barely used buffer counts as touched up to the limit", "[trace][replay]") {
    CHECK(rp::touched_bytes(0, 1 << 20) == 0);
    CHECK(rp::touched_bytes(100, 1 << 20) == 100);
    CHECK(rp::touched_bytes(1 << 20, 1 << 20) == 1 << 20);
    CHECK(rp::touched_bytes((1 << 20) + 10, 1 << 20) == (1 << 20) + 10);     // the tail line is the rest
    CHECK(rp::touched_bytes(std::uint64_t(1) << 30, 1 << 20) == (1 << 20) + 64);  // first MiB + last line
    CHECK(rp::touched_bytes(std::uint64_t(1) << 30, 0) == 64);
    CHECK(rp::touched_bytes(std::uint64_t(1) << 30, rp::touch_all) == std::uint64_t(1) << 30);

    std::uint64_t v = 0;
    CHECK(rp::parse_touch_limit("all", v));
    CHECK(v == rp::touch_all);
    CHECK(rp::parse_touch_limit("0", v));
    CHECK(v == 0);
    CHECK(rp::parse_touch_limit("4096", v));
    CHECK(v == 4096);
    CHECK(rp::parse_touch_limit("64K", v));
    CHECK(v == 64 << 10);
    CHECK(rp::parse_touch_limit("3m", v));
    CHECK(v == 3 << 20);
    CHECK(rp::parse_touch_limit("2G", v));
    CHECK(v == std::uint64_t(2) << 30);
    for (const char* bad : {"", "K", "12Q", "1.5M", "-1", "1MB", "99999999999999999999", "17179869184G"})
        CHECK_FALSE(rp::parse_touch_limit(bad, v));

    // 1 GiB live throughout, beside small churn: the requested peak is the
    // buffer, the touched peak a MiB and change.
    mini m;
    m.alloc(0x10000000, std::uint64_t(1) << 30);
    for (std::uint64_t i = 0; i < 100; ++i) m.alloc(0x1000 + 64 * i, 48);
    for (std::uint64_t i = 0; i < 100; ++i) m.free(0x1000 + 64 * i);
    m.free(0x10000000);
    const auto bytes = m.b.finish();
    const auto t = tr::parse_trace(bytes);
    const auto p = rp::make_plan(t);
    CHECK(p.touch_limit == rp::default_touch_limit);
    CHECK(p.peak_requested_bytes == (std::uint64_t(1) << 30) + 4800);
    CHECK(p.peak_touched_bytes == (1 << 20) + 64 + 4800);
    const auto all = rp::make_plan(t, rp::touch_all);
    CHECK(all.peak_touched_bytes == all.peak_requested_bytes);
    CHECK(rp::make_plan(t, 0).peak_touched_bytes == 64 + 4800);
    CHECK(rp::header_of(p).touch_limit == rp::default_touch_limit);
    CHECK(rp::header_of(all).touch_limit == rp::touch_all);
}

namespace {

rp::row measured(std::string name, std::vector<double> ms, std::vector<double> mb) {
    rp::row r;
    r.name = std::move(name);
    for (double x : ms) r.seconds.push_back(x / 1e3);
    for (double x : mb) r.peak.push_back(x * 1e6);
    r.peak_touched = 1e6;
    return r;
}

} // namespace

TEST_CASE("replay ranking: leads within the runs' spread are no clear winner", "[trace][replay]") {
    // Three allocators whose runs overlap in time (memory equal): whichever
    // median is lowest, the noise could reorder them.
    std::vector<rp::row> rows = {
        measured("glibc", {100, 112, 95}, {10, 10, 10}),
        measured("quickfit", {98, 104, 91}, {10, 10, 10}),
        measured("velox", {101, 90, 109}, {10, 10, 10}),
    };
    auto k = rp::rank(rows);
    REQUIRE(k.base);
    CHECK(k.base->name == "glibc");
    CHECK(k.repeat == 3);
    CHECK(k.recommended.best->name == "quickfit");  // the lowest median score ...
    CHECK_FALSE(k.recommended.clear());             // ... but not by more than the noise
    CHECK(k.recommended.tied.size() == 2);
    CHECK_FALSE(k.fastest.clear());
    std::string text = rp::format_verdicts(k);
    INFO(text);
    CHECK(text.find("recommended: no clear winner") != std::string::npos);
    CHECK(text.find("quickfit, glibc and velox") != std::string::npos);  // best first, then by score
    CHECK(text.find("fastest:  no clear winner") != std::string::npos);
    CHECK(text.find("leanest:  no clear winner") != std::string::npos);  // equal peaks
    CHECK(rp::recommendation(k).find("no clear winner") == 0);

    // Separated beyond the noise: quickfit's slowest run beats everyone's
    // fastest, and it is also the leanest.
    rows = {
        measured("glibc", {100, 112, 95}, {10, 10.2, 10}),
        measured("quickfit", {60, 64, 58}, {8, 8, 8}),
        measured("velox", {101, 90, 109}, {10, 10, 10}),
    };
    k = rp::rank(rows);
    CHECK(k.recommended.clear());
    CHECK(k.recommended.best->name == "quickfit");
    CHECK(k.fastest.clear());
    CHECK(k.leanest.clear());
    text = rp::format_verdicts(k);
    CHECK(text.find("no clear winner") == std::string::npos);
    CHECK(text.find("recommended: quickfit -- 0.") != std::string::npos);
    CHECK(text.find("both the fastest and the leanest") != std::string::npos);
    CHECK(text.find("note: one run") == std::string::npos);
    CHECK(k.order.front()->name == "quickfit");
    // Each run's score against glibc's medians: quickfit's range holds its median score.
    CHECK(k.order.front()->score_lo <= k.order.front()->score);
    CHECK(k.order.front()->score <= k.order.front()->score_hi);

    // Faster but not leaner beyond noise: the fastest is clear, the leanest not.
    rows = {
        measured("glibc", {100, 101, 99}, {10, 10.1, 10}),
        measured("lea", {50, 51, 49}, {10.05, 10, 10}),
    };
    k = rp::rank(rows);
    CHECK(k.fastest.clear());
    CHECK_FALSE(k.leanest.clear());
    CHECK(k.recommended.clear());
    text = rp::format_verdicts(k);
    CHECK(text.find("recommended: lea -- ") != std::string::npos);
    CHECK(text.find(", and the fastest") != std::string::npos);

    // Many within the noise: five named, the rest counted.
    rows.clear();
    for (int i = 0; i < 8; ++i)
        rows.push_back(measured("a" + std::to_string(i), {100.0 + i, 90.0 + i, 110.0 + i}, {10, 10, 10}));
    k = rp::rank(rows);
    CHECK(k.recommended.tied.size() == 7);
    text = rp::format_verdicts(k);
    CHECK(text.find("the scores of a0, a1, a2, a3, a4 and 3 more are within the noise") != std::string::npos);
    CHECK(text.find("a5 ") == std::string::npos);

    // One run each: no noise to compare with, and the report says so.
    rows = {measured("glibc", {100}, {10}), measured("lea", {99}, {10})};
    k = rp::rank(rows);
    CHECK_FALSE(k.noise_known());
    CHECK(rp::format_verdicts(k).find("note: one run per allocator: the noise is unknown") != std::string::npos);

    // Failed and skipped rows are ranked last and hold no title; no ok row: no base.
    rows = {measured("glibc", {100, 100}, {10, 10}), measured("jemalloc", {}, {})};
    rows[1].status = "skipped";
    k = rp::rank(rows);
    CHECK(k.order.back()->name == "jemalloc");
    CHECK(k.recommended.best->name == "glibc");
    rows[0].status = "failed";
    CHECK(rp::rank(rows).base == nullptr);
    CHECK(rp::format_verdicts(rp::rank(rows)).empty());
}

// The memory measure shared by the replay worker and the benchmark drivers
// subtracts the resident set before a run from its peak after; code and data
// pages of files first touched during the run must not be counted, so they are
// made resident beforehand.
TEST_CASE("process memory: file-backed pages are resident after prefault_file_mappings", "[trace][memory]") {
    const long page = ::sysconf(_SC_PAGESIZE);
    const std::size_t whole = 16;
    char named[] = "/tmp/allotheque_prefault_XXXXXX";
    const int nfd = ::mkstemp(named);
    REQUIRE(nfd >= 0);
    const std::vector<char> data(whole * static_cast<std::size_t>(page) + 100, 'x');
    REQUIRE(::write(nfd, data.data(), data.size()) == static_cast<ssize_t>(data.size()));
    // Mapped 8 pages past the file's end: reading there would raise SIGBUS.
    const std::size_t span = (whole + 8) * static_cast<std::size_t>(page);
    void* m = ::mmap(nullptr, span, PROT_READ, MAP_SHARED, nfd, 0);
    REQUIRE(m != MAP_FAILED);

    const std::size_t before = allotheque::tools::proc_status_bytes("RssFile");
    const std::size_t touched = allotheque::tools::prefault_file_mappings();
    const std::size_t after = allotheque::tools::proc_status_bytes("RssFile");
    CHECK(touched >= whole * static_cast<std::size_t>(page));
    CHECK(after >= before + whole * static_cast<std::size_t>(page));
    // Every page of the file inside its size is now mapped in: a second pass
    // adds nothing (a little slack for pages the test's own code faults in).
    const std::size_t again = allotheque::tools::prefault_file_mappings();
    CHECK(again >= touched);
    CHECK(allotheque::tools::proc_status_bytes("RssFile") <= after + 16 * static_cast<std::size_t>(page));

    ::munmap(m, span);
    ::close(nfd);
    ::unlink(named);
}

// --- rows ----------------------------------------------------------------------

namespace {

namespace mdecl = allotheque::malloc_declarations;

#define ALLOTHEQUE_TEST_UNPAREN(...) __VA_ARGS__
#define ALLOTHEQUE_TEST_STR_(...) #__VA_ARGS__
#define ALLOTHEQUE_TEST_STR(...) ALLOTHEQUE_TEST_STR_(__VA_ARGS__)

// The strings a heap row prints, spelt from the very types checked here.
struct heap_row_types {
    std::string name, direct, as_malloc;
    bool shipped_exactly;  // the shipped library declares exactly as_malloc
};

template <class Decl, class AsMalloc>
constexpr bool declares_exactly() {
    return std::is_same_v<typename Decl::heap, AsMalloc> &&
           !requires { Decl::request_size(std::size_t{}); };
}

// A heap row: its direct type is a heap, its malloc type passes what
// ALLOTHEQUE_DEFINE_MALLOC checks, and the shipped library it names declares
// that type exactly (or not, as the row says).
#define ALLOTHEQUE_TEST_HEAP_ROW(row, direct, as_malloc, decl)                                        \
    [] {                                                                                           \
        using D = ALLOTHEQUE_TEST_UNPAREN direct;                                                  \
        using M = ALLOTHEQUE_TEST_UNPAREN as_malloc;                                               \
        static_assert(allotheque::heap_like<D>);                                                   \
        static_assert(allotheque::malloc_heap<M> && allotheque::detail::check_malloc_heap<M>());   \
        return heap_row_types{row, ALLOTHEQUE_TEST_STR(ALLOTHEQUE_TEST_UNPAREN direct),            \
                              ALLOTHEQUE_TEST_STR(ALLOTHEQUE_TEST_UNPAREN as_malloc),               \
                              declares_exactly<ALLOTHEQUE_TEST_UNPAREN decl, M>()};                 \
    }()

struct no_shipped {
    using heap = void;
};

std::vector<heap_row_types> heap_rows() {
    return {
        ALLOTHEQUE_TEST_HEAP_ROW("segregated", (allotheque::segregated_heap<>),
                                 (allotheque::segregated_heap<allotheque::arena_source, allotheque::malloc_options>),
                                 (mdecl::segregated)),
        ALLOTHEQUE_TEST_HEAP_ROW("kingsley", (allotheque::kingsley_heap<>),
                                 (allotheque::kingsley_heap<allotheque::arena_source, allotheque::malloc_options>),
                                 (mdecl::kingsley)),
        ALLOTHEQUE_TEST_HEAP_ROW(
            "quickfit", (allotheque::quickfit_heap<>),
            (allotheque::quickfit_heap<allotheque::arena_source, allotheque::malloc_options, 16, 128>),
            (mdecl::quickfit)),
        ALLOTHEQUE_TEST_HEAP_ROW("velox", (allotheque::velox_heap<>),
                                 (allotheque::velox_heap<allotheque::arena_source, allotheque::malloc_options>),
                                 (mdecl::velox)),
        ALLOTHEQUE_TEST_HEAP_ROW("medius", (allotheque::medius_heap<>),
                                 (allotheque::medius_heap<allotheque::arena_source, allotheque::malloc_options>),
                                 (mdecl::medius)),
        ALLOTHEQUE_TEST_HEAP_ROW("defero", (allotheque::defero_heap<>),
                                 (allotheque::heap<allotheque::defero_partition<12, 16>, allotheque::arena_source, allotheque::malloc_options>),
                                 (no_shipped)),
        ALLOTHEQUE_TEST_HEAP_ROW("lea", (allotheque::lea_heap<>),
                                 (allotheque::lea_heap<allotheque::arena_source, allotheque::malloc_options>),
                                 (mdecl::lea)),
        ALLOTHEQUE_TEST_HEAP_ROW(
            "lea_deferred", (allotheque::lea_deferred_heap<>),
            (allotheque::lea_deferred_heap<allotheque::arena_source, allotheque::malloc_options>), (mdecl::lea)),
        ALLOTHEQUE_TEST_HEAP_ROW(
            "kingsley_coalescing", (allotheque::kingsley_coalescing_heap<>),
            (allotheque::kingsley_coalescing_heap<allotheque::arena_source, allotheque::malloc_options>),
            (no_shipped)),
    };
}

} // namespace

TEST_CASE("replay rows: every C++ type a heap row prints is checked against the headers", "[trace][replay]") {
    std::size_t heaps = 0;
    for (const auto& r : rp::rows)
        if (r.kind == rp::row_kind::heap) ++heaps;
    const auto checked = heap_rows();
    CHECK(checked.size() == heaps);  // a new heap row needs its line above
    for (const auto& t : checked) {
        INFO(t.name);
        const rp::row_info* r = rp::find_row(t.name);
        REQUIRE(r);
        CHECK(r->kind == rp::row_kind::heap);
        CHECK(std::string(r->type) == t.direct);
        CHECK(std::string(r->malloc_heap) == t.as_malloc);
        // "is that malloc" exactly when the shipped library declares the type
        // printed, without rounding of its own.
        if (r->malloc_row) {
            CHECK((std::string(r->malloc_row_is) == "is that malloc") == t.shipped_exactly);
            const rp::row_info* m = rp::find_row(r->malloc_row);
            REQUIRE(m);
            CHECK(m->kind == rp::row_kind::allotheque_malloc);
        } else {
            CHECK_FALSE(t.shipped_exactly);
        }
    }
}

TEST_CASE("replay rows: the malloc rows are the shipped declarations, by the names the libraries report",
          "[trace][replay]") {
    const std::vector<std::string> shipped = {mdecl::segregated::name, mdecl::quickfit::name, mdecl::kingsley::name,
                                              mdecl::velox::name,      mdecl::medius::name,   mdecl::lea::name};
    std::vector<std::string> rows;
    for (const auto& r : rp::rows)
        if (r.kind == rp::row_kind::allotheque_malloc) {
            rows.emplace_back(r.library);
            CHECK(std::string(r.name) == std::string("malloc-") + r.library);
            CHECK(rp::allotheque_malloc_file(r) == std::string("liballotheque_malloc_") + r.library + ".so");
        }
    CHECK(rows == shipped);
    // No two rows share a name, and a malloc row's name never is a heap's.
    for (const auto& a : rp::rows)
        for (const auto& b : rp::rows)
            if (&a != &b) CHECK(std::string(a.name) != b.name);
}

TEST_CASE("replay rows: how to use the pick", "[trace][replay]") {
    SECTION("shell quoting round-trips what a shell would split or expand") {
        CHECK(rp::shell_quote("plain-word_1.2/x=y:z,a+b@c%") == "plain-word_1.2/x=y:z,a+b@c%");
        CHECK(rp::shell_quote("") == "''");
        CHECK(rp::shell_quote("two words") == "'two words'");
        CHECK(rp::shell_quote("it's $HOME") == "'it'\\''s $HOME'");
        CHECK(rp::command_line({}) == "PROGRAM");
        CHECK(rp::command_line({"python3", "-c", "print(1)"}) == "python3 -c 'print(1)'");
    }
    SECTION("a malloc row: the LD_PRELOAD line of the library replayed, then the program") {
        rp::usage_context c;
        c.library = "/opt/al lib/liballotheque_malloc_velox.so";
        c.command = {"./app", "--n", "3"};
        const auto u = rp::how_to_use(*rp::find_row("malloc-velox"), c);
        CHECK(u.preload == "LD_PRELOAD='/opt/al lib/liballotheque_malloc_velox.so' ./app --n 3");
        REQUIRE(u.code.size() == 1);
        CHECK(u.code[0] == u.preload);
        CHECK(u.cxx.empty());
        CHECK(u.text[0].find("liballotheque_malloc_velox.so") != std::string::npos);
        c.library = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";
        CHECK(rp::how_to_use(*rp::find_row("jemalloc"), c).preload ==
              "LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 ./app --n 3");
    }
    SECTION("glibc: nothing to do") {
        const auto u = rp::how_to_use(*rp::find_row("glibc"), {});
        CHECK(u.code.empty());
        CHECK(u.preload.empty());
    }
    SECTION("a header-only heap: its declaration, the malloc declaration, the CMake line, the shipped library") {
        rp::usage_context c;
        c.command = {"prog"};
        c.malloc_row_library = "/x/liballotheque_malloc_quickfit.so";
        c.malloc_row_result = "0.90x glibc's time and 1.01x its peak memory, score 0.91, rank 2 of 5";
        const auto u = rp::how_to_use(*rp::find_row("quickfit"), c);
        CHECK(u.cxx.find("using heap = allotheque::quickfit_heap<>;") != std::string::npos);
        CHECK(u.cxx.find("#include <allotheque/allocators/quickfit.hpp>") == 0);
        CHECK(u.malloc_cxx ==
              "#include <allotheque/malloc.hpp>\n"
              "#include <allotheque/allocators/quickfit.hpp>\n"
              "struct my_malloc {\n"
              "    using heap = allotheque::quickfit_heap<allotheque::arena_source, allotheque::malloc_options, 16, 128>;\n"
              "    static constexpr const char* name = \"my-quickfit\";\n"
              "};\n"
              "ALLOTHEQUE_DEFINE_MALLOC(my_malloc);");
        CHECK(u.cmake == "allotheque_add_malloc(my_malloc SOURCES my_malloc.cpp)");
        CHECK(u.preload.empty());  // the heap itself is not preloaded
        CHECK(u.code.back() == "LD_PRELOAD=/x/liballotheque_malloc_quickfit.so prog");
        bool told = false;
        for (const auto& l : u.text) told = told || l.find("malloc-quickfit measured it here: 0.90x") != std::string::npos;
        CHECK(told);
        // Not measured: how to measure it.
        rp::usage_context none;
        none.command = {"prog"};
        bool hint = false;
        for (const auto& l : rp::how_to_use(*rp::find_row("velox"), none).text)
            hint = hint || l.find("--allocators ...,malloc-velox") != std::string::npos;
        CHECK(hint);
        // No shipped library on the heap: said so.
        bool said = false;
        for (const auto& l : rp::how_to_use(*rp::find_row("defero"), none).text)
            said = said || l.find("No shipped malloc library") != std::string::npos;
        CHECK(said);
    }
}
