// libFuzzer harness for the trace reader and everything that consumes a trace:
// any byte string must either parse or throw trace_error, and a parsed trace
// must go through resolve(), the summary (text and HTML; parsed whole and
// streamed by trace_reader, which must agree), and the replay planner (which
// may refuse it with plan_error) without crashing, under ASan+UBSan.
//
// Input: one control byte, then the file. Control bit 0 recomputes every
// record's checksum before parsing, so mutations get past the checksum and
// reach the block decoder and the consumers; bit 1 reads with allow_truncated.
#include <cstddef>
#include <cstdint>
#include <vector>

#include <allotheque/trace/objects.hpp>
#include <allotheque/trace/reader.hpp>

#include "replay_plan.hpp"
#include "summary.hpp"

namespace tr = allotheque::trace;

namespace {

void fix_checksums(std::vector<std::byte>& b) {
    std::size_t off = tr::file_header_bytes;
    while (b.size() >= off + tr::record_header_bytes) {
        const auto size = tr::load<std::uint32_t>(b.data() + off + 4);
        if (size > b.size() - off - tr::record_header_bytes) return;
        tr::store<std::uint64_t>(b.data() + off + 8, tr::checksum(b.data() + off + tr::record_header_bytes, size));
        off += tr::record_header_bytes + size;
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1 || size > (1u << 20)) return 0;
    const std::uint8_t control = data[0];
    std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data + 1),
                                 reinterpret_cast<const std::byte*>(data + size));
    if (control & 1) fix_checksums(bytes);
    tr::trace t;
    try {
        t = tr::parse_trace(bytes, {.allow_truncated = (control & 2) != 0});
    } catch (const tr::trace_error&) {
        return 0;
    }
    const tr::timeline tl = tr::resolve(t);
    const auto s = allotheque::tools::summarise(t);
    // The command streams the trace instead of parsing it whole: the same
    // summary, or the two paths have diverged.
    const auto streamed =
        allotheque::tools::summarise(tr::trace_reader(bytes, {.allow_truncated = (control & 2) != 0}));
    if (allotheque::tools::format_text(streamed, {}, 10) != allotheque::tools::format_text(s, {}, 10))
        __builtin_trap();
    const auto syms = allotheque::tools::symbolize_sites(s, t.maps, false, nullptr);
    (void)allotheque::tools::format_text(s, syms, 10);
    (void)allotheque::tools::html_report(s, syms);
    try {
        (void)allotheque::tools::replay::make_plan(t, tl);
    } catch (const allotheque::tools::replay::plan_error&) {
        // The planner's defined answer to a trace it cannot replay (a size
        // beyond 2^56, say); `replay` prints it and exits 1.
    }
    return 0;
}
