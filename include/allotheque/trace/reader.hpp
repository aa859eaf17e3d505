// Reads an allotheque trace (trace/format.hpp) into memory.
//
// Every malformed input — wrong magic, another major version, a record cut
// short, a checksum mismatch, an event running past its block, a missing END
// record — becomes a trace_error naming the byte offset, never a crash or a
// silently shorter trace. read_options::allow_truncated keeps what was read
// before a cut (a program killed before exit leaves such a trace).
#ifndef ALLOTHEQUE_TRACE_READER_HPP
#define ALLOTHEQUE_TRACE_READER_HPP

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdint>
#include <fstream>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "format.hpp"

namespace allotheque::trace {

class trace_error : public std::runtime_error {
public:
    trace_error(const std::string& what, std::uint64_t offset)
        : std::runtime_error(what + " (at byte " + std::to_string(offset) + ")"), message_(what), offset_(offset) {}
    std::uint64_t offset() const noexcept { return offset_; }
    const std::string& message() const noexcept { return message_; }

private:
    std::string message_;
    std::uint64_t offset_;
};

struct event {
    std::uint64_t time_ns = 0;  // since the traced process started
    std::uint64_t address = 0;  // returned (allocations) or released (frees)
    std::uint64_t old_address = 0;  // realloc only
    std::uint64_t size = 0;     // requested bytes; frees: only when `sized`
    std::uint64_t site = 0;     // return address of the call
    std::uint32_t thread = 0;
    op kind = op::malloc_;
    std::uint8_t align_log2 = 0;  // 0 = the default alignment
    bool failed = false;
    bool sized = false;
};

struct process_info {
    std::uint32_t pid = 0, ppid = 0;
    std::uint64_t real_ns = 0;  // wall-clock start, ns since the epoch
    std::string exe;
    std::vector<std::string> args;
};

struct thread_info {
    std::uint32_t thread = 0, os_tid = 0;
    std::uint64_t events = 0;
};

struct trace {
    std::uint16_t major = 0, minor = 0;
    process_info process;
    std::string maps;             // last MAPS record: the mappings to symbolise sites with
    std::vector<event> events;    // every thread, in time order
    std::vector<thread_info> threads;
    bool complete = false;        // an END record was read
    end_record end{};
    double ns_per_tick = 1.0;
    std::uint64_t duration_ns = 0;
    std::uint64_t skipped_records = 0;  // unknown types of a newer minor version
    std::string truncation;       // why reading stopped early (allow_truncated only)
};

struct read_options {
    bool allow_truncated = false;
};

namespace detail {

class cursor {
public:
    cursor(const std::byte* p, const std::byte* end, std::uint64_t offset) : p_(p), end_(end), base_(p), off_(offset) {}
    std::uint64_t offset() const noexcept { return off_ + std::uint64_t(p_ - base_); }
    bool done() const noexcept { return p_ == end_; }
    [[noreturn]] void fail(const std::string& what) const { throw trace_error(what, offset()); }
    std::uint8_t byte() {
        if (p_ == end_) fail("event runs past the end of its block");
        return std::uint8_t(*p_++);
    }
    std::uint64_t varint() {
        std::uint64_t v = 0;
        for (unsigned shift = 0; shift < 64; shift += 7) {
            const std::uint8_t b = byte();
            v |= std::uint64_t(b & 0x7f) << shift;
            if (!(b & 0x80)) return v;
        }
        fail("varint longer than 10 bytes");
    }
    std::int64_t svarint() { return unzigzag(varint()); }
    std::string text(const char* what) {
        if (end_ - p_ < 4) fail(std::string("truncated ") + what + " length");
        const auto n = load<std::uint32_t>(p_);
        p_ += 4;
        if (std::uint64_t(end_ - p_) < n) fail(std::string(what) + " longer than its record");
        std::string s(reinterpret_cast<const char*>(p_), n);
        p_ += n;
        return s;
    }

private:
    const std::byte* p_;
    const std::byte* end_;
    const std::byte* base_;
    std::uint64_t off_;
};

inline void decode_block(const std::byte* payload, std::uint32_t size, std::uint64_t offset, trace& t,
                         std::vector<std::uint64_t>& ticks, std::vector<bool>& unstamped, std::uint64_t& last_clock,
                         std::uint64_t& last_mono) {
    if (size < block_header::bytes) throw trace_error("block record shorter than its header", offset);
    block_header h;
    std::memcpy(&h, payload, sizeof h);
    last_clock = h.clock;
    last_mono = h.mono_ns;
    if (h.events > size) throw trace_error("block claims more events than it has bytes", offset);
    cursor c(payload + block_header::bytes, payload + size, offset + block_header::bytes);
    delta_state s{h.base_time, h.base_address, h.base_site};
    for (std::uint32_t i = 0; i < h.events; ++i) {
        event e;
        const std::uint8_t code = c.byte();
        if (!is_known(code & op_mask)) c.fail("unknown operation code " + std::to_string(code & op_mask));
        e.kind = op(code & op_mask);
        e.failed = code & flag_failed;
        if (code & flag_aligned) {
            e.align_log2 = c.byte();
            if (e.align_log2 == 0 || e.align_log2 > 62) c.fail("alignment 2^" + std::to_string(e.align_log2) + " out of range");
        }
        if ((code & flag_sized) && !is_free(e.kind)) c.fail("size flag on an allocation");
        const std::int64_t dt = c.svarint();
        s.time += std::uint64_t(dt);
        unstamped.push_back((h.flags & block_flag_sampled_time) && i > 0 && dt == 0);
        s.address += std::uint64_t(c.svarint());
        e.address = s.address;
        if (is_allocation(e.kind) || (code & flag_sized)) e.size = c.varint();
        e.sized = code & flag_sized;
        if (e.kind == op::realloc_) e.old_address = e.address + std::uint64_t(c.svarint());
        s.site += std::uint64_t(c.svarint());
        e.site = s.site;
        e.thread = h.thread;
        ticks.push_back(s.time);
        t.events.push_back(e);
    }
    if (!c.done()) c.fail("block has bytes after its last event");
    auto it = std::find_if(t.threads.begin(), t.threads.end(), [&](const thread_info& x) { return x.thread == h.thread; });
    if (it == t.threads.end()) it = t.threads.insert(t.threads.end(), thread_info{h.thread, h.os_tid, 0});
    it->events += h.events;
}

} // namespace detail

// Parses a whole trace held in memory.
inline trace parse_trace(std::span<const std::byte> bytes, read_options opt = {}) {
    trace t;
    const std::byte* const base = bytes.data();
    const std::uint64_t n = bytes.size();
    if (n < file_header_bytes) throw trace_error("not an allotheque trace: file shorter than its 32-byte header", 0);
    if (std::memcmp(base, file_magic, sizeof file_magic) != 0)
        throw trace_error("not an allotheque trace: bad magic number", 0);
    t.major = load<std::uint16_t>(base + 8);
    t.minor = load<std::uint16_t>(base + 10);
    if (t.major != format_major)
        throw trace_error("trace format version " + std::to_string(t.major) + "." + std::to_string(t.minor) +
                              " is not supported (this reader reads version " + std::to_string(format_major) + ".x)",
                          8);
    const auto header_bytes = load<std::uint32_t>(base + 12);
    if (header_bytes < file_header_bytes || header_bytes > n) throw trace_error("bad file header size", 12);

    std::vector<std::uint64_t> ticks;
    std::vector<bool> unstamped;
    std::uint64_t start_clock = 0, start_mono = 0, last_clock = 0, last_mono = 0, sequence = 0;
    bool have_process = false;
    std::uint64_t off = header_bytes;
    auto stop = [&](const std::string& why) {
        if (!opt.allow_truncated) throw trace_error(why, off);
        t.truncation = why + " (at byte " + std::to_string(off) + ")";
    };
    while (off < n) {
        if (n - off < record_header_bytes) {
            stop("trace truncated inside a record header");
            break;
        }
        const auto type = load<std::uint32_t>(base + off);
        const auto size = load<std::uint32_t>(base + off + 4);
        const auto sum = load<std::uint64_t>(base + off + 8);
        if (size > max_payload_bytes) throw trace_error("record size " + std::to_string(size) + " is not plausible", off);
        if (n - off - record_header_bytes < size) {
            stop("trace truncated: a record of " + std::to_string(size) + " bytes has only " +
                 std::to_string(n - off - record_header_bytes));
            break;
        }
        const std::byte* payload = base + off + record_header_bytes;
        if (checksum(payload, size) != sum) throw trace_error("corrupt record: checksum mismatch", off);
        if (t.complete) throw trace_error("record after the END record", off);
        switch (record_type(type)) {
            case record_type::process: {
                if (size < process_header::bytes) throw trace_error("process record too short", off);
                process_header h;
                std::memcpy(&h, payload, sizeof h);
                t.process.pid = h.pid;
                t.process.ppid = h.ppid;
                t.process.real_ns = h.real_ns;
                start_clock = last_clock = h.clock;
                start_mono = last_mono = h.mono_ns;
                detail::cursor c(payload + process_header::bytes, payload + size, off + record_header_bytes);
                t.process.exe = c.text("executable path");
                const std::string cmd = c.text("command line");
                for (std::size_t i = 0; i < cmd.size();) {
                    const std::size_t j = std::min(cmd.find('\0', i), cmd.size());
                    t.process.args.push_back(cmd.substr(i, j - i));
                    i = j + 1;
                }
                have_process = true;
                break;
            }
            case record_type::maps:
                t.maps.assign(reinterpret_cast<const char*>(payload), size);
                break;
            case record_type::block: {
                if (!have_process) throw trace_error("event block before the process record", off);
                if (size >= block_header::bytes) {
                    const auto seq = load<std::uint64_t>(payload + offsetof(block_header, sequence));
                    if (seq != sequence)
                        throw trace_error("block " + std::to_string(seq) + " found where block " +
                                              std::to_string(sequence) + " was expected (a block is missing)",
                                          off);
                }
                ++sequence;
                detail::decode_block(payload, size, off + record_header_bytes, t, ticks, unstamped, last_clock,
                                     last_mono);
                break;
            }
            case record_type::end:
                if (size < end_record::bytes) throw trace_error("end record too short", off);
                std::memcpy(&t.end, payload, sizeof t.end);
                if (t.end.blocks != sequence)
                    throw trace_error("end record counts " + std::to_string(t.end.blocks) + " blocks, the trace has " +
                                          std::to_string(sequence),
                                      off);
                last_clock = t.end.clock;
                last_mono = t.end.mono_ns;
                t.complete = true;
                break;
            default:
                if (t.minor <= format_minor)
                    throw trace_error("unknown record type 0x" + [](std::uint32_t v) {
                        char b[9];
                        std::snprintf(b, sizeof b, "%08x", v);
                        return std::string(b);
                    }(type), off);
                ++t.skipped_records;
        }
        off += record_header_bytes + size;
    }
    if (!have_process && !t.events.empty()) throw trace_error("trace has no process record", header_bytes);
    if (!t.complete && t.truncation.empty())
        stop("trace truncated: no END record (the traced program did not exit normally, or the file was cut)");

    if (last_clock > start_clock && last_mono > start_mono)
        t.ns_per_tick = double(last_mono - start_mono) / double(last_clock - start_clock);
    // Sampled times (block_flag_sampled_time): with one thread, spread each run
    // of unstamped events evenly up to the next stamp (or the last clock
    // reading); with several, they keep the previous stamp.
    if (t.threads.size() == 1) {
        const std::size_t n = ticks.size();
        for (std::size_t i = 0; i < n;) {
            if (!unstamped[i] || i == 0) {
                ++i;
                continue;
            }
            std::size_t j = i;
            while (j < n && unstamped[j]) ++j;
            const std::uint64_t lo = ticks[i - 1];
            const std::uint64_t hi = j < n ? ticks[j] : last_clock;
            if (hi > lo)
                for (std::size_t k = i; k < j; ++k)
                    ticks[k] = lo + std::uint64_t(double(hi - lo) * double(k - i + 1) / double(j - i + 1));
            i = j;
        }
    }
    // Threads flush independently: restore the global order by time, keeping
    // each thread's own order for equal stamps.
    std::vector<std::uint32_t> order(t.events.size());
    for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return ticks[a] < ticks[b]; });
    // A damaged (or hostile) trace can make the ratio absurd: saturate rather
    // than convert an out-of-range double, which is undefined.
    auto to_ns = [&](std::uint64_t tick) -> std::uint64_t {
        const double ns = double(tick) * t.ns_per_tick;
        return ns >= 1.8e19 ? std::uint64_t(1.8e19) : std::uint64_t(ns);
    };
    std::vector<event> sorted;
    sorted.reserve(t.events.size());
    for (auto i : order) {
        event e = t.events[i];
        e.time_ns = to_ns(ticks[i] > start_clock ? ticks[i] - start_clock : 0);
        sorted.push_back(e);
    }
    t.events = std::move(sorted);
    t.duration_ns = last_clock > start_clock ? to_ns(last_clock - start_clock) : 0;
    if (!t.events.empty()) t.duration_ns = std::max(t.duration_ns, t.events.back().time_ns);
    return t;
}

inline trace read_trace(const std::string& path, read_options opt = {}) {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) throw trace_error("cannot open trace '" + path + "'", 0);
    const auto size = static_cast<std::streamoff>(in.tellg());
    std::vector<std::byte> bytes(static_cast<std::size_t>(size));
    in.seekg(0);
    if (!in.read(reinterpret_cast<char*>(bytes.data()), size)) throw trace_error("cannot read trace '" + path + "'", 0);
    try {
        return parse_trace(bytes, opt);
    } catch (const trace_error& e) {
        throw trace_error(path + ": " + e.message(), e.offset());
    }
}

} // namespace allotheque::trace

#endif
