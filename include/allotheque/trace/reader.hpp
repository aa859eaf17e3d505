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
#include <unordered_map>
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
    std::vector<event> events;    // every thread, in time order (empty in trace_reader::info())
    std::uint64_t event_count = 0;  // events in the trace, also where `events` is not filled
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

// Decodes the event at `c`, the `index`-th of a block with `flags`, against
// the block's delta state `s`; returns its raw tick. `unstamped` says the
// event has no time of its own (sampled time: the reader places it).
inline std::uint64_t decode_event(cursor& c, delta_state& s, std::uint32_t flags, std::uint32_t index,
                                  std::uint32_t thread, event& e, bool& unstamped) {
    const std::uint8_t code = c.byte();
    if (!is_known(code & op_mask)) c.fail("unknown operation code " + std::to_string(code & op_mask));
    e.kind = op(code & op_mask);
    e.failed = code & flag_failed;
    e.align_log2 = 0;
    if (code & flag_aligned) {
        e.align_log2 = c.byte();
        if (e.align_log2 == 0 || e.align_log2 > 62) c.fail("alignment 2^" + std::to_string(e.align_log2) + " out of range");
    }
    if ((code & flag_sized) && !is_free(e.kind)) c.fail("size flag on an allocation");
    const std::int64_t dt = c.svarint();
    s.time += std::uint64_t(dt);
    unstamped = (flags & block_flag_sampled_time) && index > 0 && dt == 0;
    s.address += std::uint64_t(c.svarint());
    e.address = s.address;
    e.size = is_allocation(e.kind) || (code & flag_sized) ? c.varint() : 0;
    e.sized = code & flag_sized;
    e.old_address = e.kind == op::realloc_ ? e.address + std::uint64_t(c.svarint()) : 0;
    s.site += std::uint64_t(c.svarint());
    e.site = s.site;
    e.thread = thread;
    return s.time;
}

// The tick of the event at `p` (already validated), without decoding the rest.
inline std::uint64_t peek_tick(const std::byte* p, const std::byte* end, const delta_state& s) {
    cursor c(p, end, 0);
    if (c.byte() & flag_aligned) c.byte();
    return s.time + std::uint64_t(c.svarint());
}

// Where one BLK1 record's payload lies in the file.
struct block_ref {
    std::uint64_t payload = 0;  // offset of the block header
    std::uint32_t size = 0;     // payload bytes
    std::uint32_t next = 0;     // the same thread's next block (index into the list), or none
};
inline constexpr std::uint32_t no_block = 0xffffffffu;

} // namespace detail

// Reads a trace in two steps. Constructing a trace_reader checks the whole
// file — every record, checksum and event — and throws trace_error as
// parse_trace does, but keeps no events: info() is the trace without them
// (info().event_count says how many). events() then decodes them again on
// the fly, in global time order, for a single pass (the summary), so a
// trace is analysed in memory proportional to the file, not to its decoded
// events. The threads' blocks are merged by time (a k-way merge: each
// thread's events keep their recorded order, equal stamps keep file order).
//
// A reader made from a span views it: the bytes must outlive the reader,
// and the reader its streams.
class trace_reader {
public:
    explicit trace_reader(std::span<const std::byte> bytes, read_options opt = {}) : bytes_(bytes) { index(opt); }
    static trace_reader open(const std::string& path, read_options opt = {});
    trace_reader(trace_reader&&) noexcept = default;
    trace_reader& operator=(trace_reader&&) noexcept = default;

    const trace& info() const noexcept { return info_; }

    class stream;
    stream events() const;

private:
    trace_reader() = default;
    void index(const read_options& opt);
    std::uint64_t to_ns(std::uint64_t tick) const noexcept {
        // A damaged (or hostile) trace can make the ratio absurd: saturate
        // rather than convert an out-of-range double, which is undefined.
        const double ns = double(tick > start_clock_ ? tick - start_clock_ : 0) * info_.ns_per_tick;
        return ns >= 1.8e19 ? std::uint64_t(1.8e19) : std::uint64_t(ns);
    }

    std::vector<std::byte> owned_;  // the file, when the reader read it
    std::span<const std::byte> bytes_;
    trace info_;
    std::vector<detail::block_ref> blocks_;   // in file (= flush) order
    std::vector<std::uint32_t> first_block_;  // per thread, in the order of info_.threads
    std::uint64_t start_clock_ = 0, last_clock_ = 0;
};

class trace_reader::stream {
public:
    // The next event in time order; false after the last.
    bool next(event& e) {
        if (heap_.empty()) return false;
        const std::uint32_t k = heap_.front();
        std::pop_heap(heap_.begin(), heap_.end(), later());  // k is now last
        thread_cursor& c = cursors_[k];
        detail::cursor in(c.p, c.end, 0);
        bool unstamped = false;
        std::uint64_t tick = detail::decode_event(in, c.state, c.flags, c.index, c.thread, e, unstamped);
        c.p += in.offset();
        if (single_ && unstamped) tick = spread(c, tick);
        else run_left_ = 0;
        e.time_ns = r_->to_ns(tick);
        ++c.index;
        if (advance(c)) std::push_heap(heap_.begin(), heap_.end(), later());
        else heap_.pop_back();
        return true;
    }

private:
    friend class trace_reader;
    struct thread_cursor {
        const std::byte* p = nullptr;  // the next event
        const std::byte* end = nullptr;
        delta_state state;
        std::uint64_t tick = 0;        // of the next event, for the merge
        std::uint32_t block = 0, index = 0, events = 0, flags = 0, thread = 0;
    };
    // Heap order: the earliest next event on top; equal ticks in file order.
    struct later_first {
        const std::vector<thread_cursor>* c;
        bool operator()(std::uint32_t a, std::uint32_t b) const noexcept {
            const thread_cursor &x = (*c)[a], &y = (*c)[b];
            if (x.tick != y.tick) return x.tick > y.tick;
            if (x.block != y.block) return x.block > y.block;
            return x.index > y.index;
        }
    };
    later_first later() const noexcept { return {&cursors_}; }

    explicit stream(const trace_reader& r) : r_(&r) {
        cursors_.resize(r.first_block_.size());
        single_ = cursors_.size() == 1;
        for (std::uint32_t k = 0; k < cursors_.size(); ++k) {
            if (!enter(cursors_[k], r.first_block_[k])) continue;
            heap_.push_back(k);
        }
        std::make_heap(heap_.begin(), heap_.end(), later());
    }
    // Points `c` at the first event of `block` (or of the thread's next
    // block holding events); false when the thread has none left.
    bool enter(thread_cursor& c, std::uint32_t block) {
        for (; block != detail::no_block; block = r_->blocks_[block].next) {
            const detail::block_ref& b = r_->blocks_[block];
            const std::byte* payload = r_->bytes_.data() + b.payload;
            block_header h;
            std::memcpy(&h, payload, sizeof h);
            if (h.events == 0) continue;
            c.p = payload + block_header::bytes;
            c.end = payload + b.size;
            c.state = delta_state{h.base_time, h.base_address, h.base_site};
            c.block = block;
            c.index = 0;
            c.events = h.events;
            c.flags = h.flags;
            c.thread = h.thread;
            c.tick = detail::peek_tick(c.p, c.end, c.state);
            return true;
        }
        return false;
    }
    bool advance(thread_cursor& c) {
        if (c.index < c.events) {
            c.tick = detail::peek_tick(c.p, c.end, c.state);
            return true;
        }
        return enter(c, r_->blocks_[c.block].next);
    }
    // Sampled time with one thread: a run of unstamped events is spread
    // evenly between the stamp before it and the next one (or the last clock
    // reading), in decode order.
    std::uint64_t spread(const thread_cursor& c, std::uint64_t tick) {
        if (run_left_ == 0) {
            // Start of a run: `tick` is the previous stamp. Count the run (it
            // ends inside this block: a block's first event is always stamped)
            // and find the stamp after it.
            run_lo_ = tick;
            run_len_ = 1;
            detail::cursor in(c.p, c.end, 0);
            delta_state s = c.state;
            event e;
            bool unstamped = false;
            bool found = false;
            for (std::uint32_t i = c.index + 1; i < c.events; ++i) {
                const std::uint64_t t = detail::decode_event(in, s, c.flags, i, c.thread, e, unstamped);
                if (!unstamped) {
                    run_hi_ = t;
                    found = true;
                    break;
                }
                ++run_len_;
            }
            if (!found) {
                thread_cursor n;
                run_hi_ = enter(n, r_->blocks_[c.block].next) ? n.tick : r_->last_clock_;
            }
            run_left_ = run_len_;
        }
        const std::uint64_t k = run_len_ - run_left_ + 1;  // 1-based position in the run
        --run_left_;
        if (run_hi_ <= run_lo_) return tick;
        return run_lo_ + std::uint64_t(double(run_hi_ - run_lo_) * double(k) / double(run_len_ + 1));
    }

    const trace_reader* r_;
    std::vector<thread_cursor> cursors_;
    std::vector<std::uint32_t> heap_;  // threads with events left, a min-heap by next tick
    bool single_ = false;
    std::uint64_t run_lo_ = 0, run_hi_ = 0, run_len_ = 0, run_left_ = 0;
};

inline trace_reader::stream trace_reader::events() const { return stream(*this); }

inline void trace_reader::index(const read_options& opt) {
    trace& t = info_;
    const std::byte* const base = bytes_.data();
    const std::uint64_t n = bytes_.size();
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

    // Thread ids are the tracer's numbers: look them up, never scan the list
    // (a trace can have hundreds of thousands of threads).
    std::unordered_map<std::uint32_t, std::uint32_t> slot_of;
    std::vector<std::uint32_t> last_block;
    std::uint64_t start_mono = 0, last_mono = 0, sequence = 0, max_tick = 0;
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
        const std::uint64_t poff = off + record_header_bytes;
        const std::byte* payload = base + poff;
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
                start_clock_ = last_clock_ = h.clock;
                start_mono = last_mono = h.mono_ns;
                detail::cursor c(payload + process_header::bytes, payload + size, poff);
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
                if (size < block_header::bytes) throw trace_error("block record shorter than its header", poff);
                block_header h;
                std::memcpy(&h, payload, sizeof h);
                last_clock_ = h.clock;
                last_mono = h.mono_ns;
                if (h.events > size) throw trace_error("block claims more events than it has bytes", poff);
                // Decode every event now, so that a damaged trace is refused
                // here and the streams can trust the bytes.
                detail::cursor c(payload + block_header::bytes, payload + size, poff + block_header::bytes);
                delta_state s{h.base_time, h.base_address, h.base_site};
                event e;
                bool unstamped = false;
                for (std::uint32_t i = 0; i < h.events; ++i)
                    max_tick = std::max(max_tick, detail::decode_event(c, s, h.flags, i, h.thread, e, unstamped));
                if (!c.done()) c.fail("block has bytes after its last event");
                if (blocks_.size() >= detail::no_block) throw trace_error("trace has too many blocks", off);
                const auto b = static_cast<std::uint32_t>(blocks_.size());
                blocks_.push_back(detail::block_ref{poff, size, detail::no_block});
                auto [it, fresh] = slot_of.try_emplace(h.thread, static_cast<std::uint32_t>(t.threads.size()));
                if (fresh) {
                    t.threads.push_back(thread_info{h.thread, h.os_tid, 0});
                    first_block_.push_back(b);
                    last_block.push_back(b);
                } else {
                    blocks_[last_block[it->second]].next = b;
                    last_block[it->second] = b;
                }
                t.threads[it->second].events += h.events;
                t.event_count += h.events;
                break;
            }
            case record_type::end:
                if (size < end_record::bytes) throw trace_error("end record too short", off);
                std::memcpy(&t.end, payload, sizeof t.end);
                if (t.end.blocks != sequence)
                    throw trace_error("end record counts " + std::to_string(t.end.blocks) + " blocks, the trace has " +
                                          std::to_string(sequence),
                                      off);
                last_clock_ = t.end.clock;
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
        off = poff + size;
    }
    if (!have_process && t.event_count) throw trace_error("trace has no process record", header_bytes);
    if (!t.complete && t.truncation.empty())
        stop("trace truncated: no END record (the traced program did not exit normally, or the file was cut)");

    if (last_clock_ > start_clock_ && last_mono > start_mono)
        t.ns_per_tick = double(last_mono - start_mono) / double(last_clock_ - start_clock_);
    // No event is later than the last clock reading or the last stamp (a
    // spread one lies between stamps).
    t.duration_ns = last_clock_ > start_clock_ ? to_ns(last_clock_) : 0;
    if (t.event_count) t.duration_ns = std::max(t.duration_ns, to_ns(max_tick));
}

inline trace_reader trace_reader::open(const std::string& path, read_options opt) {
    trace_reader r;
    {
        std::ifstream in(path, std::ios::binary | std::ios::ate);
        if (!in) throw trace_error("cannot open trace '" + path + "'", 0);
        const auto size = static_cast<std::streamoff>(in.tellg());
        r.owned_.resize(static_cast<std::size_t>(size));
        in.seekg(0);
        if (!in.read(reinterpret_cast<char*>(r.owned_.data()), size))
            throw trace_error("cannot read trace '" + path + "'", 0);
    }
    r.bytes_ = r.owned_;
    try {
        r.index(opt);
    } catch (const trace_error& e) {
        throw trace_error(path + ": " + e.message(), e.offset());
    }
    return r;
}

// The whole trace, every event decoded (48 bytes each): what the replay
// planner and the tests use.
inline trace materialise(const trace_reader& r) {
    trace t = r.info();
    t.events.reserve(t.event_count);
    auto s = r.events();
    for (event e; s.next(e);) t.events.push_back(e);
    return t;
}

// Parses a whole trace held in memory.
inline trace parse_trace(std::span<const std::byte> bytes, read_options opt = {}) {
    return materialise(trace_reader(bytes, opt));
}

inline trace read_trace(const std::string& path, read_options opt = {}) {
    return materialise(trace_reader::open(path, opt));
}

} // namespace allotheque::trace

#endif
