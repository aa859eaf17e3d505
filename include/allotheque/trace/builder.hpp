// Builds a trace in memory: the same bytes the tracer writes, for tests, for
// synthetic workloads, and for converting other tools' traces.
#ifndef ALLOTHEQUE_TRACE_BUILDER_HPP
#define ALLOTHEQUE_TRACE_BUILDER_HPP

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "format.hpp"

namespace allotheque::trace {

class builder {
public:
    // Times are in ticks; the builder's clock runs at one tick per nanosecond.
    explicit builder(std::string exe = "/bin/synthetic", std::vector<std::string> args = {"synthetic"}) {
        std::byte h[file_header_bytes];
        make_file_header(h);
        append(bytes_, h, sizeof h);
        process_header p;
        p.pid = 1;
        std::vector<std::byte> payload(process_header::bytes);
        std::memcpy(payload.data(), &p, sizeof p);
        put_text(payload, exe);
        std::string cmd;
        for (const auto& a : args) cmd += a + '\0';  // as in /proc/self/cmdline
        put_text(payload, cmd);
        record(record_type::process, payload);
    }

    // Appends one event to the open block of `thread`.
    builder& add(op o, std::uint64_t time, std::uint64_t address, std::uint64_t size = 0, std::uint64_t site = 0,
                 std::uint32_t thread = 0, std::uint64_t old_address = 0, std::uint32_t align_log2 = 0,
                 bool failed = false, bool sized = false) {
        if (!block_.empty() && thread != header_.thread) flush();
        if (block_.empty()) {
            header_ = block_header{};
            header_.thread = thread;
            header_.os_tid = 1000 + thread;
            header_.sequence = sequence_;
            header_.flags = flags_;
            state_ = delta_state{};
        }
        std::byte buf[max_event_bytes];
        std::byte* end = encode_event(buf, state_, o, failed, time, address, old_address, size, align_log2, sized, site);
        append(block_, buf, std::size_t(end - buf));
        ++header_.events;
        header_.clock = header_.mono_ns = time;
        last_time_ = time;
        return *this;
    }
    // Blocks from now on carry these flags (block_flag_sampled_time: an event
    // repeating the previous time has no stamp of its own).
    builder& block_flags(std::uint32_t f) {
        flush();
        flags_ = f;
        return *this;
    }
    builder& maps(const std::string& text) {
        flush();
        record(record_type::maps, std::vector<std::byte>(reinterpret_cast<const std::byte*>(text.data()),
                                                         reinterpret_cast<const std::byte*>(text.data() + text.size())));
        return *this;
    }
    // Closes the open block and writes the END record; returns the file's bytes.
    std::vector<std::byte> finish(std::uint64_t dropped = 0) {
        flush();
        end_record e;
        e.clock = e.mono_ns = last_time_ + 1;
        e.events = events_;
        e.dropped = dropped;
        e.blocks = sequence_;
        e.threads = 1;
        std::vector<std::byte> payload(end_record::bytes);
        std::memcpy(payload.data(), &e, sizeof e);
        record(record_type::end, payload);
        return bytes_;
    }
    // The bytes so far, without an END record: what a killed program leaves.
    std::vector<std::byte> unfinished() {
        flush();
        return bytes_;
    }
    void flush() {
        if (block_.empty()) return;
        std::vector<std::byte> payload(block_header::bytes);
        std::memcpy(payload.data(), &header_, sizeof header_);
        append(payload, block_.data(), block_.size());
        record(record_type::block, payload);
        events_ += header_.events;
        ++sequence_;
        block_.clear();
    }

private:
    // resize + memcpy rather than insert(end, first, last), on which g++ 12
    // -O3 reports a false -Wstringop-overflow.
    static void append(std::vector<std::byte>& v, const void* p, std::size_t n) {
        if (n == 0) return;
        const std::size_t at = v.size();
        v.resize(at + n);
        std::memcpy(v.data() + at, p, n);
    }
    static void put_text(std::vector<std::byte>& out, const std::string& s) {
        std::byte n[4];
        store<std::uint32_t>(n, std::uint32_t(s.size()));
        append(out, n, 4);
        append(out, s.data(), s.size());
    }
    void record(record_type t, const std::vector<std::byte>& payload) {
        std::byte h[record_header_bytes];
        make_record_header(h, t, payload.data(), std::uint32_t(payload.size()));
        append(bytes_, h, sizeof h);
        append(bytes_, payload.data(), payload.size());
    }

    std::vector<std::byte> bytes_, block_;
    block_header header_{};
    delta_state state_{};
    std::uint64_t sequence_ = 0, events_ = 0, last_time_ = 0;
    std::uint32_t flags_ = 0;
};

} // namespace allotheque::trace

#endif
