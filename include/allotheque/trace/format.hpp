// allotheque trace format, version 1 (docs/trace_format.md is the reference).
//
// A trace is a 32-byte file header followed by records; each record is a
// 16-byte header {type, payload size, checksum} and its payload. Events travel
// in per-thread blocks, delta-encoded with LEB128 varints, so a typical event
// takes 5–8 bytes. Everything here is allocation-free: the tracer, which runs
// inside malloc, uses the encoder; the reader (trace/reader.hpp) decodes.
#ifndef ALLOTHEQUE_TRACE_FORMAT_HPP
#define ALLOTHEQUE_TRACE_FORMAT_HPP

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace allotheque::trace {

inline constexpr char file_magic[8] = {'A', 'T', 'Q', 'T', 'R', 'A', 'C', 'E'};
// A reader accepts any minor version of its major: newer minors may only add
// record types, which an older reader skips.
inline constexpr std::uint16_t format_major = 1;
inline constexpr std::uint16_t format_minor = 1;  // 1.1: block flags (sampled time)
inline constexpr std::uint32_t file_header_bytes = 32;
inline constexpr std::uint32_t record_header_bytes = 16;
// No tracer writes a bigger record; a reader treats a bigger size as corruption
// rather than trying to allocate it.
inline constexpr std::uint32_t max_payload_bytes = 64u << 20;

constexpr std::uint32_t fourcc(char a, char b, char c, char d) noexcept {
    return std::uint32_t(std::uint8_t(a)) | std::uint32_t(std::uint8_t(b)) << 8 |
           std::uint32_t(std::uint8_t(c)) << 16 | std::uint32_t(std::uint8_t(d)) << 24;
}

enum class record_type : std::uint32_t {
    process = fourcc('P', 'R', 'O', 'C'),  // who was traced, clock origin
    maps = fourcc('M', 'A', 'P', 'S'),     // /proc/self/maps text, for symbolising call sites
    block = fourcc('B', 'L', 'K', '1'),    // one thread's events
    end = fourcc('E', 'N', 'D', '.'),      // clean exit: totals and clock calibration
};

// What the program called. The allocation ops return `address`; the free ops
// release it; realloc releases `old_address` and returns `address`.
enum class op : std::uint8_t {
    malloc_ = 0, calloc_ = 1, realloc_ = 2, memalign_ = 3, posix_memalign_ = 4, aligned_alloc_ = 5,
    valloc_ = 6, new_ = 7, new_array = 8,
    free_ = 16, delete_ = 17, delete_array = 18,
};
inline constexpr std::uint8_t op_mask = 0x1f;
inline constexpr std::uint8_t flag_failed = 0x20;   // the call returned null / threw
inline constexpr std::uint8_t flag_aligned = 0x40;  // a log2(alignment) byte follows
inline constexpr std::uint8_t flag_sized = 0x80;    // a free op carries the size (sized delete)

constexpr bool is_allocation(op o) noexcept { return std::uint8_t(o) < 16; }
constexpr bool is_free(op o) noexcept { return std::uint8_t(o) >= 16 && std::uint8_t(o) <= 18; }
constexpr bool is_known(std::uint8_t o) noexcept { return o <= 8 || (o >= 16 && o <= 18); }

// Little-endian fixed-width fields (the only byte order written; a big-endian
// host would have to swap, and none is supported).
template <class T>
inline void store(std::byte* p, T v) noexcept { std::memcpy(p, &v, sizeof v); }
template <class T>
inline T load(const std::byte* p) noexcept {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// 64-bit word-at-a-time checksum: cheap enough to run inside the tracer's
// flush (about a cycle a byte), strong enough to catch torn or edited records.
inline std::uint64_t checksum(const std::byte* p, std::size_t n) noexcept {
    std::uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        h = (h ^ load<std::uint64_t>(p + i)) * 0xff51afd7ed558ccdull;
        h ^= h >> 29;
    }
    for (; i < n; ++i) h = (h ^ std::uint64_t(p[i])) * 0x100000001b3ull;
    h ^= h >> 32;
    return h * 0xc4ceb9fe1a85ec53ull;
}

constexpr std::uint64_t zigzag(std::int64_t v) noexcept {
    return (std::uint64_t(v) << 1) ^ std::uint64_t(v >> 63);
}
constexpr std::int64_t unzigzag(std::uint64_t v) noexcept {
    return std::int64_t(v >> 1) ^ -std::int64_t(v & 1);
}
inline std::byte* put_varint(std::byte* p, std::uint64_t v) noexcept {
    while (v >= 0x80) {
        *p++ = std::byte(std::uint8_t(v) | 0x80);
        v >>= 7;
    }
    *p++ = std::byte(v);
    return p;
}
inline constexpr std::size_t max_varint_bytes = 10;
// Worst case of one encoded event: op, align byte and five varints.
inline constexpr std::size_t max_event_bytes = 2 + 5 * max_varint_bytes;

// Payload of a BLK1 record: this header, then `events` encoded events.
// `clock`/`mono_ns` are read together when the block is flushed, so a reader
// can convert ticks to nanoseconds even from a trace whose END record is lost.
struct block_header {
    static constexpr std::size_t bytes = 64;
    std::uint32_t thread = 0;     // tracer's thread number, 0 = first thread seen
    std::uint32_t os_tid = 0;
    std::uint32_t events = 0;
    std::uint32_t flags = 0;      // block_flag_* (version 1.0: always 0)
    std::uint64_t base_time = 0;  // deltas of the first event are taken from these
    std::uint64_t base_address = 0;
    std::uint64_t base_site = 0;
    std::uint64_t clock = 0;
    std::uint64_t mono_ns = 0;
    std::uint64_t sequence = 0;   // global flush order, to detect missing blocks
};

// Reading the clock costs more than the rest of an event (rdtsc: ~11 ns on a
// VM), so a tracer may stamp only some events of a single-threaded process.
// In a block with this flag, an event after the first whose time delta is 0
// carries no time of its own: a reader places it between its stamped
// neighbours (one thread) or at the previous stamp (several threads: never
// later than it happened, so a free is never sorted after the reuse of its
// address by another thread).
inline constexpr std::uint32_t block_flag_sampled_time = 1;
// How the tracer samples: one stamped event in this many while only one
// thread has allocated; every event once a second thread has.
inline constexpr std::uint32_t time_sample_period = 8;

// Delta state of one block being written or read.
struct delta_state {
    std::uint64_t time = 0, address = 0, site = 0;
};

// Encodes one event at `p` (room for max_event_bytes needed); returns the end.
// For realloc, `address` is the new block and `old_address` the released one.
inline std::byte* encode_event(std::byte* p, delta_state& s, op o, bool failed, std::uint64_t time,
                               std::uint64_t address, std::uint64_t old_address, std::uint64_t size,
                               std::uint32_t align_log2, bool sized, std::uint64_t site) noexcept {
    std::uint8_t code = std::uint8_t(o);
    if (failed) code |= flag_failed;
    if (align_log2) code |= flag_aligned;
    if (sized && is_free(o)) code |= flag_sized;
    *p++ = std::byte(code);
    if (align_log2) *p++ = std::byte(std::uint8_t(align_log2));
    p = put_varint(p, zigzag(std::int64_t(time - s.time)));
    p = put_varint(p, zigzag(std::int64_t(address - s.address)));
    if (is_allocation(o) || (code & flag_sized)) p = put_varint(p, size);
    if (o == op::realloc_) p = put_varint(p, zigzag(std::int64_t(old_address - address)));
    p = put_varint(p, zigzag(std::int64_t(site - s.site)));
    s.time = time;
    s.address = address;
    s.site = site;
    return p;
}

inline const char* op_name(op o) noexcept {
    switch (o) {
        case op::malloc_: return "malloc";
        case op::calloc_: return "calloc";
        case op::realloc_: return "realloc";
        case op::memalign_: return "memalign";
        case op::posix_memalign_: return "posix_memalign";
        case op::aligned_alloc_: return "aligned_alloc";
        case op::valloc_: return "valloc";
        case op::new_: return "new";
        case op::new_array: return "new[]";
        case op::free_: return "free";
        case op::delete_: return "delete";
        case op::delete_array: return "delete[]";
    }
    return "?";
}

// Payload of the PROC record: this, then the executable path and the command
// line (arguments separated by NUL), each preceded by its u32 length.
struct process_header {
    static constexpr std::size_t bytes = 48;
    std::uint32_t pid = 0, ppid = 0;
    std::uint64_t clock = 0, mono_ns = 0, real_ns = 0;  // origin of the trace's time axis
    std::uint64_t reserved[2] = {};
};

// Payload of the END record.
struct end_record {
    static constexpr std::size_t bytes = 48;
    std::uint64_t clock = 0, mono_ns = 0;
    std::uint64_t events = 0;   // events written in blocks
    std::uint64_t dropped = 0;  // events not recorded (after shutdown, or no buffer)
    std::uint64_t blocks = 0;
    std::uint64_t threads = 0;
};

// The 32-byte file header: magic, major, minor, header size, then zeros.
inline void make_file_header(std::byte (&out)[file_header_bytes]) noexcept {
    std::memset(out, 0, sizeof out);
    std::memcpy(out, file_magic, sizeof file_magic);
    store<std::uint16_t>(out + 8, format_major);
    store<std::uint16_t>(out + 10, format_minor);
    store<std::uint32_t>(out + 12, file_header_bytes);
}

// The 16-byte record header: type, payload size, payload checksum.
inline void make_record_header(std::byte (&out)[record_header_bytes], record_type type, const std::byte* payload,
                               std::uint32_t size) noexcept {
    store<std::uint32_t>(out, std::uint32_t(type));
    store<std::uint32_t>(out + 4, size);
    store<std::uint64_t>(out + 8, checksum(payload, size));
}

// The three headers are written as their bytes (no padding, little-endian).
static_assert(sizeof(block_header) == block_header::bytes);
static_assert(sizeof(process_header) == process_header::bytes);
static_assert(sizeof(end_record) == end_record::bytes);

} // namespace allotheque::trace

#endif
