// A declared malloc's run-time options, read from the environment once, when
// the first thread heap is made (getenv and a hand-written parser: nothing is
// allocated, and it works before main). A bad value is reported on stderr and
// ignored: the option keeps its default, and the program runs on.
//
//   ALLOTHEQUE_SHOW_STATS=1       statistics on stderr at exit (malloc_stats())
//   ALLOTHEQUE_VERBOSE=1          the options in force, and warnings, on stderr
//   ALLOTHEQUE_RETAIN_BYTES=N     free pages each heap keeps for reuse, at least
//                                 (heap_config::retain_bytes; suffixes k, m, g)
//   ALLOTHEQUE_PURGE_DELAY_MS=N   how long free pages beyond that stay before
//                                 going back (heap_config::purge_delay_ms)
#pragma once
#include <stdlib.h>

#include <cstddef>
#include <cstdint>

#include <allotheque/detail/text_out.hpp>

namespace allotheque {

struct malloc_settings {
    bool show_stats = false;
    bool verbose = false;
    std::size_t retain_bytes = 0;
    unsigned purge_delay_ms = 0;
};

namespace detail {

// Decimal digits, with an optional k/m/g suffix (powers of 1024) where
// `suffixes`; false on anything else or on a value above `limit`.
inline bool parse_number(const char* s, std::uint64_t limit, bool suffixes, std::uint64_t& out) noexcept {
    if (!s) return false;
    const char* digits = s;
    std::uint64_t v = 0;
    for (; *s >= '0' && *s <= '9'; ++s) {
        if (v > (limit - static_cast<std::uint64_t>(*s - '0')) / 10) return false;
        v = v * 10 + static_cast<std::uint64_t>(*s - '0');
    }
    if (s == digits) return false;
    unsigned shift = 0;
    if (suffixes) switch (*s) {
    case 'k': case 'K': shift = 10; ++s; break;
    case 'm': case 'M': shift = 20; ++s; break;
    case 'g': case 'G': shift = 30; ++s; break;
    default: break;
    }
    if (*s != '\0') return false;
    if (shift && v > (limit >> shift)) return false;
    out = v << shift;
    return true;
}

inline bool parse_flag(const char* name, const char* s, bool& out) noexcept {
    if (!s) return true;
    if ((s[0] == '1' || s[0] == '0') && s[1] == '\0') {
        out = s[0] == '1';
        return true;
    }
    text_out(2) << "allotheque malloc: " << name << "=" << s << " ignored (expected 0 or 1)\n";
    return false;
}

} // namespace detail

// The settings, the defaults being the heap's configured values.
inline malloc_settings read_malloc_settings(std::size_t default_retain, unsigned default_purge) noexcept {
    malloc_settings m{.retain_bytes = default_retain, .purge_delay_ms = default_purge};
    detail::parse_flag("ALLOTHEQUE_SHOW_STATS", ::getenv("ALLOTHEQUE_SHOW_STATS"), m.show_stats);
    detail::parse_flag("ALLOTHEQUE_VERBOSE", ::getenv("ALLOTHEQUE_VERBOSE"), m.verbose);
    if (const char* s = ::getenv("ALLOTHEQUE_RETAIN_BYTES")) {
        std::uint64_t v;
        if (detail::parse_number(s, SIZE_MAX, true, v))
            m.retain_bytes = static_cast<std::size_t>(v);
        else
            detail::text_out(2) << "allotheque malloc: ALLOTHEQUE_RETAIN_BYTES=" << s
                                << " ignored (expected bytes, with an optional k, m or g)\n";
    }
    if (const char* s = ::getenv("ALLOTHEQUE_PURGE_DELAY_MS")) {
        std::uint64_t v;
        if (detail::parse_number(s, UINT32_MAX, false, v))
            m.purge_delay_ms = static_cast<unsigned>(v);
        else
            detail::text_out(2) << "allotheque malloc: ALLOTHEQUE_PURGE_DELAY_MS=" << s
                                << " ignored (expected milliseconds, 0 to 4294967295)\n";
    }
    return m;
}

} // namespace allotheque
