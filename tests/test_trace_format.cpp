// The trace format: what is written is what is read, for any event sequence;
// every damaged trace (cut anywhere, any byte changed, wrong version) is
// rejected with a trace_error naming the offset — never a crash, never a
// silently different trace.
#include <allotheque/trace/builder.hpp>
#include <allotheque/trace/objects.hpp>
#include <allotheque/trace/reader.hpp>

#include <cstdio>
#include <algorithm>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "catch.hpp"

namespace tr = allotheque::trace;

namespace {

struct expected_event {
    tr::op kind;
    std::uint64_t time, address, size, site, old_address;
    std::uint32_t thread, align_log2;
    bool failed, sized;
};

// A random but well-formed sequence over a few threads: times increase,
// addresses and sites jump both ways (negative deltas), sizes span 0..2^40.
std::vector<expected_event> random_events(std::mt19937_64& rng, std::size_t n) {
    std::vector<expected_event> v;
    std::uint64_t time = 1000;
    const tr::op ops[] = {tr::op::malloc_, tr::op::calloc_, tr::op::realloc_, tr::op::memalign_,
                          tr::op::posix_memalign_, tr::op::aligned_alloc_, tr::op::valloc_, tr::op::new_,
                          tr::op::new_array, tr::op::free_, tr::op::delete_, tr::op::delete_array};
    for (std::size_t i = 0; i < n; ++i) {
        expected_event e{};
        e.kind = ops[rng() % std::size(ops)];
        time += rng() % 5000;
        e.time = time;
        e.address = rng() % 3 == 0 ? 0 : (rng() & 0x7fff'ffff'fff0ull);
        e.site = 0x400000 + rng() % 0x100000;
        e.thread = static_cast<std::uint32_t>(rng() % 3);
        e.failed = tr::is_allocation(e.kind) && rng() % 17 == 0;
        if (tr::is_allocation(e.kind)) {
            e.size = std::uint64_t(1) << (rng() % 41);
            e.size += rng() % e.size;
            if (rng() % 4 == 0) e.align_log2 = static_cast<std::uint32_t>(1 + rng() % 20);
        } else if (rng() % 2) {
            e.sized = true;
            e.size = rng() % 100000;
        }
        if (e.kind == tr::op::realloc_) e.old_address = rng() & 0x7fff'ffff'fff0ull;
        v.push_back(e);
    }
    return v;
}

std::vector<std::byte> build(const std::vector<expected_event>& events, bool finish = true) {
    tr::builder b("/usr/bin/prog", {"prog", "--flag", ""});
    for (const auto& e : events)
        b.add(e.kind, e.time, e.address, e.size, e.site, e.thread, e.old_address, e.align_log2, e.failed, e.sized);
    return finish ? b.finish() : b.unfinished();
}

// Parses, and reports anything other than success or trace_error as a failure.
enum class outcome { parsed, rejected };
outcome try_parse(const std::vector<std::byte>& bytes, tr::read_options opt = {}) {
    try {
        (void)tr::parse_trace(bytes, opt);
        return outcome::parsed;
    } catch (const tr::trace_error&) {
        return outcome::rejected;
    }
}

} // namespace

TEST_CASE("trace: a random event sequence round-trips exactly", "[trace]") {
    std::mt19937_64 rng(42);
    for (int round = 0; round < 20; ++round) {
        const auto events = random_events(rng, 1 + rng() % 3000);
        const auto t = tr::parse_trace(build(events));
        REQUIRE(t.complete);
        REQUIRE(t.major == tr::format_major);
        REQUIRE(t.process.exe == "/usr/bin/prog");
        REQUIRE(t.process.args == std::vector<std::string>{"prog", "--flag", ""});
        REQUIRE(t.events.size() == events.size());
        REQUIRE(t.end.events == events.size());
        // The builder's clock is one tick per ns and starts at 0, and the
        // input is already in time order, so the order and stamps are kept.
        for (std::size_t i = 0; i < events.size(); ++i) {
            const auto& w = events[i];
            const auto& r = t.events[i];
            INFO("event " << i);
            REQUIRE(r.kind == w.kind);
            REQUIRE(r.time_ns == w.time);
            REQUIRE(r.address == w.address);
            REQUIRE(r.site == w.site);
            REQUIRE(r.thread == w.thread);
            REQUIRE(r.failed == w.failed);
            REQUIRE(r.align_log2 == w.align_log2);
            REQUIRE(r.sized == w.sized);
            REQUIRE(r.size == w.size);
            if (w.kind == tr::op::realloc_) REQUIRE(r.old_address == w.old_address);
        }
    }
}

TEST_CASE("trace: threads' blocks are merged back into time order", "[trace]") {
    tr::builder b;
    // Thread 1's block is flushed first but its events come later.
    b.add(tr::op::malloc_, 50, 0x1000, 8, 1, 1).add(tr::op::malloc_, 70, 0x2000, 8, 1, 1);
    b.flush();
    b.add(tr::op::malloc_, 10, 0x3000, 8, 2, 0).add(tr::op::free_, 60, 0x3000, 0, 2, 0);
    const auto t = tr::parse_trace(b.finish());
    REQUIRE(t.events.size() == 4);
    std::vector<std::uint64_t> times;
    for (const auto& e : t.events) times.push_back(e.time_ns);
    REQUIRE(times == std::vector<std::uint64_t>{10, 50, 60, 70});
    REQUIRE(t.threads.size() == 2);
}

TEST_CASE("trace: sampled times are spread between stamps with one thread, floored with several", "[trace]") {
    // One thread: stamps at 100 and 180, three unstamped events between them
    // (their delta is 0), then two unstamped ones closed by the END clock.
    tr::builder one;
    one.block_flags(tr::block_flag_sampled_time);
    one.add(tr::op::malloc_, 100, 0x10, 8).add(tr::op::malloc_, 100, 0x20, 8).add(tr::op::malloc_, 100, 0x30, 8);
    one.add(tr::op::malloc_, 100, 0x40, 8).add(tr::op::malloc_, 180, 0x50, 8);
    one.add(tr::op::free_, 180, 0x10).add(tr::op::free_, 180, 0x20);
    const auto t1 = tr::parse_trace(one.finish());
    std::vector<std::uint64_t> times;
    for (const auto& e : t1.events) times.push_back(e.time_ns);
    // END is written at the last time + 1 = 181: the tail run spreads to it.
    REQUIRE(times == std::vector<std::uint64_t>{100, 120, 140, 160, 180, 180, 180});
    // (180 -> 181 over three steps rounds down to 180.)

    // Two threads: unstamped events keep the previous stamp, never later.
    tr::builder two;
    two.block_flags(tr::block_flag_sampled_time);
    two.add(tr::op::malloc_, 100, 0x10, 8, 0, 0).add(tr::op::free_, 100, 0x10, 0, 0, 0);
    two.add(tr::op::malloc_, 150, 0x10, 8, 0, 1);
    const auto t2 = tr::parse_trace(two.finish());
    REQUIRE(t2.events.size() == 3);
    REQUIRE(t2.events[0].time_ns == 100);
    REQUIRE(t2.events[1].time_ns == 100);
    REQUIRE(t2.events[1].kind == tr::op::free_);  // the free stays before the reuse
    REQUIRE(t2.events[2].time_ns == 150);

    // Without the flag, equal times are just equal.
    tr::builder plain;
    plain.add(tr::op::malloc_, 100, 0x10, 8).add(tr::op::malloc_, 100, 0x20, 8).add(tr::op::malloc_, 200, 0x30, 8);
    const auto t3 = tr::parse_trace(plain.finish());
    REQUIRE(t3.events[1].time_ns == 100);
}

TEST_CASE("trace: an empty trace is valid", "[trace]") {
    const auto t = tr::parse_trace(tr::builder().finish());
    REQUIRE(t.complete);
    REQUIRE(t.events.empty());
    REQUIRE(tr::resolve(t).objects.empty());
}

TEST_CASE("trace: cut at every offset is rejected, or salvaged with allow_truncated", "[trace]") {
    std::mt19937_64 rng(7);
    const auto events = random_events(rng, 300);
    tr::builder b;
    for (std::size_t i = 0; i < events.size(); ++i) {
        const auto& e = events[i];
        b.add(e.kind, e.time, e.address, e.size, e.site, e.thread, e.old_address, e.align_log2, e.failed, e.sized);
        if (i % 50 == 49) b.flush();  // several blocks, so some cuts fall between them
    }
    const auto full = b.finish();
    REQUIRE(try_parse(full) == outcome::parsed);
    for (std::size_t cut = 0; cut < full.size(); ++cut) {
        const std::vector<std::byte> part(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(cut));
        INFO("cut at " << cut);
        REQUIRE(try_parse(part) == outcome::rejected);
        if (cut >= tr::file_header_bytes) {
            // Salvage keeps the whole blocks before the cut and says why it stopped.
            const auto t = tr::parse_trace(part, {.allow_truncated = true});
            REQUIRE_FALSE(t.complete);
            REQUIRE_FALSE(t.truncation.empty());
            REQUIRE(t.events.size() <= events.size());
        }
    }
}

TEST_CASE("trace: the message of a truncated trace says so", "[trace]") {
    tr::builder b;
    b.add(tr::op::malloc_, 1, 0x10, 16, 1);
    const auto bytes = b.unfinished();  // a program killed before exit
    try {
        (void)tr::parse_trace(bytes);
        FAIL("accepted a trace without END record");
    } catch (const tr::trace_error& e) {
        REQUIRE(std::string(e.what()).find("truncated") != std::string::npos);
    }
    const auto t = tr::parse_trace(bytes, {.allow_truncated = true});
    REQUIRE(t.events.size() == 1);
}

TEST_CASE("trace: any single changed byte is caught", "[trace]") {
    std::mt19937_64 rng(11);
    const auto full = build(random_events(rng, 200));
    for (std::size_t i = 0; i < full.size(); ++i) {
        auto bad = full;
        bad[i] ^= std::byte(1 + rng() % 255);
        INFO("byte " << i);
        // The minor version (10..11) may legitimately be anything newer, and
        // the reserved bytes of the file header (16..31) carry nothing.
        if ((i >= 10 && i < 12) || (i >= 16 && i < tr::file_header_bytes)) continue;
        REQUIRE(try_parse(bad) == outcome::rejected);
    }
}

TEST_CASE("trace: random garbage never crashes the reader", "[trace]") {
    std::mt19937_64 rng(3);
    const auto base = build(random_events(rng, 100));
    for (int round = 0; round < 3000; ++round) {
        auto bad = base;
        // Rewrite a few bytes and recompute nothing: includes record sizes
        // pointing anywhere and huge event counts.
        for (int k = 0; k < 1 + int(rng() % 8); ++k) bad[rng() % bad.size()] = std::byte(rng());
        (void)try_parse(bad);
        (void)try_parse(bad, {.allow_truncated = true});
    }
    // Garbage whose checksums are right: only the structural checks stand
    // between it and the decoder.
    for (int round = 0; round < 3000; ++round) {
        std::vector<std::byte> payload(tr::block_header::bytes + rng() % 200);
        for (auto& x : payload) x = std::byte(rng());
        tr::store<std::uint64_t>(payload.data() + offsetof(tr::block_header, sequence), 0);
        auto bytes = tr::builder().unfinished();
        std::byte h[tr::record_header_bytes];
        tr::make_record_header(h, tr::record_type::block, payload.data(), std::uint32_t(payload.size()));
        bytes.insert(bytes.end(), h, h + sizeof h);
        bytes.insert(bytes.end(), payload.begin(), payload.end());
        (void)try_parse(bytes, {.allow_truncated = true});
    }
}

TEST_CASE("trace: structural errors have clear messages", "[trace]") {
    auto message = [](const std::vector<std::byte>& bytes) -> std::string {
        try {
            (void)tr::parse_trace(bytes);
        } catch (const tr::trace_error& e) {
            return e.what();
        }
        return "accepted";
    };
    auto good = tr::builder().finish();

    auto not_trace = good;
    not_trace[0] = std::byte('X');
    REQUIRE(message(not_trace).find("not an allotheque trace") != std::string::npos);
    REQUIRE(message(std::vector<std::byte>(10)).find("shorter than its 32-byte header") != std::string::npos);

    auto future = good;
    tr::store<std::uint16_t>(future.data() + 8, 2);
    REQUIRE(message(future).find("version 2." + std::to_string(tr::format_minor) + " is not supported") !=
            std::string::npos);

    // A newer minor version may add record types: skipped, not an error.
    auto newer = tr::builder().unfinished();
    tr::store<std::uint16_t>(newer.data() + 10, tr::format_minor + 1);
    const std::byte extra[3] = {std::byte(1), std::byte(2), std::byte(3)};
    std::byte h[tr::record_header_bytes];
    tr::make_record_header(h, tr::record_type(tr::fourcc('N', 'E', 'W', '!')), extra, 3);
    newer.insert(newer.end(), h, h + sizeof h);
    newer.insert(newer.end(), extra, extra + 3);
    auto rest = tr::builder().finish();
    // Append the END record of an empty trace (last 16 + 48 bytes).
    newer.insert(newer.end(), rest.end() - 64, rest.end());
    const auto t = tr::parse_trace(newer);
    REQUIRE(t.skipped_records == 1);
    // In the current minor version, an unknown type is corruption.
    tr::store<std::uint16_t>(newer.data() + 10, tr::format_minor);
    REQUIRE(message(newer).find("unknown record type") != std::string::npos);

    auto huge = tr::builder().unfinished();
    std::byte big[tr::record_header_bytes] = {};
    tr::store<std::uint32_t>(big, std::uint32_t(tr::record_type::block));
    tr::store<std::uint32_t>(big + 4, 0xffff'fff0u);
    huge.insert(huge.end(), big, big + sizeof big);
    REQUIRE(message(huge).find("not plausible") != std::string::npos);
}

TEST_CASE("trace: a missing block is detected by its sequence number", "[trace]") {
    tr::builder b;
    b.add(tr::op::malloc_, 1, 0x10, 16, 1).flush();
    const auto one = b.unfinished().size();
    b.add(tr::op::malloc_, 2, 0x20, 16, 1).flush();
    const auto two = b.unfinished().size();
    b.add(tr::op::malloc_, 3, 0x30, 16, 1);
    auto bytes = b.finish();
    bytes.erase(bytes.begin() + static_cast<std::ptrdiff_t>(one), bytes.begin() + static_cast<std::ptrdiff_t>(two));
    try {
        (void)tr::parse_trace(bytes);
        FAIL("accepted a trace with a block removed");
    } catch (const tr::trace_error& e) {
        REQUIRE(std::string(e.what()).find("a block is missing") != std::string::npos);
    }
}

TEST_CASE("trace: read_trace names the file in its errors", "[trace]") {
    auto message = [](const std::string& p) -> std::string {
        try {
            (void)tr::read_trace(p);
        } catch (const tr::trace_error& e) {
            return e.what();
        }
        return "accepted";
    };
    REQUIRE(message("/nonexistent/x.trace").find("cannot open trace") != std::string::npos);
    const std::string path = "test_trace_format.tmp.trace";
    {
        std::ofstream out(path, std::ios::binary);
        out << "garbage, not a trace at all";
    }
    REQUIRE(message(path).find(path + ": not an allotheque trace") != std::string::npos);
    std::remove(path.c_str());
}

TEST_CASE("trace objects: allocations pair with their frees", "[trace]") {
    tr::builder b;
    b.add(tr::op::malloc_, 1, 0x100, 10, 7)
        .add(tr::op::new_, 2, 0x200, 20, 8)
        .add(tr::op::realloc_, 3, 0x300, 30, 9, 0, 0x100)   // moves object 0
        .add(tr::op::free_, 4, 0x999)                        // never allocated
        .add(tr::op::free_, 5, 0)                            // free(NULL)
        .add(tr::op::malloc_, 6, 0, 1ull << 50, 7, 0, 0, 0, true)  // failed
        .add(tr::op::delete_, 7, 0x200, 20, 8, 0, 0, 0, false, true)
        .add(tr::op::malloc_, 8, 0x300, 40, 7)               // 0x300 still live: a lost free
        .add(tr::op::realloc_, 9, 0, 0, 9, 0, 0x300);         // realloc(p, 0) freed it
    const auto t = tr::parse_trace(b.finish());
    const auto r = tr::resolve(t);
    REQUIRE(r.objects.size() == 4);
    REQUIRE(r.objects[0].died_event == 2);
    REQUIRE(r.objects[1].died_ns == 7);
    REQUIRE(r.objects[2].size == 30);
    REQUIRE(r.objects[2].died_event == 7);
    REQUIRE(r.objects[3].died_event == 8);
    REQUIRE(r.unknown_frees == 1);
    REQUIRE(r.null_frees == 1);
    REQUIRE(r.failed == 1);
    REQUIRE(r.reused_live == 1);
    REQUIRE(r.born[2] == 2);
    REQUIRE(r.ended[2] == 0);
}

TEST_CASE("trace: threads flushed out of order merge by time, each keeping its own order", "[trace]") {
    // Each thread's events in increasing time; the threads' blocks are
    // flushed in random chunks, so a thread's events can lie far behind
    // another's in the file. The stream must come out sorted by time, ties in
    // file order, and trace_reader::info() must describe the same trace.
    std::mt19937_64 rng(21);
    for (int round = 0; round < 30; ++round) {
        const unsigned threads = 1 + unsigned(rng() % 6);
        struct ev {
            std::uint64_t time, address;
            std::uint32_t thread;
        };
        std::vector<std::vector<ev>> per(threads);
        std::uint64_t t = 10;
        for (unsigned i = 0; i < 2000; ++i) {
            const auto th = std::uint32_t(rng() % threads);
            t += rng() % 4;  // equal times happen
            per[th].push_back({t, 0x1000 + 16 * std::uint64_t(i), th});
        }
        tr::builder b;
        std::vector<std::size_t> next(threads, 0);
        std::vector<ev> file_order;
        for (bool left = true; left;) {
            left = false;
            for (unsigned th = 0; th < threads; ++th) {
                const std::size_t n = std::min<std::size_t>(per[th].size() - next[th], 1 + rng() % 300);
                for (std::size_t k = 0; k < n; ++k) {
                    const ev& e = per[th][next[th]++];
                    b.add(tr::op::malloc_, e.time, e.address, 8, 0x400000, e.thread);
                    file_order.push_back(e);
                }
                b.flush();
                left |= next[th] < per[th].size();
            }
        }
        const auto bytes = b.finish();
        std::vector<ev> want = file_order;
        std::stable_sort(want.begin(), want.end(), [](const ev& x, const ev& y) { return x.time < y.time; });

        const tr::trace_reader r(bytes);
        REQUIRE(r.info().events.empty());
        REQUIRE(r.info().event_count == want.size());
        REQUIRE(r.info().threads.size() == [&] {
            std::size_t n = 0;
            for (const auto& p : per) n += !p.empty();
            return n;
        }());
        auto s = r.events();
        std::size_t i = 0;
        for (tr::event e; s.next(e); ++i) {
            REQUIRE(i < want.size());
            INFO("event " << i);
            REQUIRE(e.time_ns == want[i].time);
            REQUIRE(e.address == want[i].address);
            REQUIRE(e.thread == want[i].thread);
        }
        REQUIRE(i == want.size());
        const auto whole = tr::parse_trace(bytes);
        REQUIRE(whole.events.size() == want.size());
        REQUIRE(whole.duration_ns == r.info().duration_ns);
    }
}

TEST_CASE("trace: a hundred thousand threads are read in linear time", "[trace]") {
    // Thread ids are looked up, not searched: with a list scan this trace
    // takes minutes (one block per thread).
    constexpr std::uint32_t threads = 100'000;
    tr::builder b;
    for (std::uint32_t th = 0; th < threads; ++th)
        b.add(tr::op::malloc_, 1 + th, 0x1000 + 16 * std::uint64_t(th), 1 + th % 7, 0x400000, th);
    const auto t = tr::parse_trace(b.finish());
    REQUIRE(t.threads.size() == threads);
    REQUIRE(t.events.size() == threads);
    for (std::uint32_t th = 0; th < threads; ++th) {
        REQUIRE(t.threads[th].thread == th);
        REQUIRE(t.threads[th].os_tid == 1000 + th);
        REQUIRE(t.threads[th].events == 1);
        REQUIRE(t.events[th].thread == th);
    }
}

TEST_CASE("trace objects: the live-address map behaves like std::map", "[trace]") {
    // Random inserts, lookups and erasures over a small key space, so that
    // probe runs collide, wrap around the table and shift back on erasure.
    std::mt19937_64 rng(5);
    tr::detail::address_map<std::uint64_t> m;
    std::map<std::uint64_t, std::uint64_t> model;
    for (int i = 0; i < 200'000; ++i) {
        const std::uint64_t key = 16 * (1 + rng() % 3000) + (rng() % 4 == 0 ? 0x7f00'0000'0000ull : 0);
        const auto k = m.find(key);
        const auto it = model.find(key);
        REQUIRE((k == m.npos) == (it == model.end()));
        if (it != model.end()) {
            REQUIRE(m.at(k) == it->second);
            if (rng() % 2) {
                m.erase(k);
                model.erase(it);
            }
        } else {
            m.insert(key, std::uint64_t(i));
            model.emplace(key, std::uint64_t(i));
        }
        REQUIRE(m.size() == model.size());
    }
    REQUIRE(m.find(0) == m.npos);  // 0 marks an empty slot, never a key
    for (const auto& [key, value] : model) {
        const auto k = m.find(key);
        REQUIRE(k != m.npos);
        REQUIRE(m.at(k) == value);
    }
}
