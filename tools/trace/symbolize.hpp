// Call sites -> function and file:line (docs/trace.md, "Summarise").
//
// A site is a return address in the traced process. The trace's MAPS record
// (the traced process's /proc/self/maps) says which file was mapped there; the
// module-relative address is looked up with binutils' addr2line, once per
// module. The return address points after the call instruction, so the lookup
// uses site - 1. Whatever cannot be resolved (no MAPS record, a file that is
// gone or was rebuilt since, no addr2line, no debug info) falls back to
// "module+0xoffset", never to an error.
#ifndef ALLOTHEQUE_TOOLS_TRACE_SYMBOLIZE_HPP
#define ALLOTHEQUE_TOOLS_TRACE_SYMBOLIZE_HPP

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "spawn.hpp"

extern char** environ;

namespace allotheque::tools {

// One frame of a site: the innermost (inlined) function first.
struct frame {
    std::string function;  // demangled; empty if unknown
    std::string file;      // empty if unknown
    unsigned line = 0;
};

struct symbol {
    std::uint64_t address = 0;  // the site: a return address in the traced process
    std::string module;         // path of the mapped file; empty if none
    std::uint64_t offset = 0;   // address - module base (what `addr2line -e module` takes, +1)
    std::vector<frame> frames;  // empty when not symbolised

    const std::string& function() const {
        static const std::string none;
        for (const auto& f : frames)
            if (!f.function.empty()) return f.function;
        return none;
    }
    // "file:line" when known (the innermost frame with a file), else "module+0xoff",
    // else the raw address.
    std::string location() const {
        for (const auto& f : frames)
            if (!f.file.empty()) return f.file + ":" + std::to_string(f.line);
        return module_location();
    }
    std::string module_location() const {
        char buf[40];
        if (module.empty()) {
            std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(address));
            return buf;
        }
        std::snprintf(buf, sizeof buf, "+0x%llx", static_cast<unsigned long long>(offset));
        return module_name() + buf;
    }
    std::string module_name() const {
        const auto slash = module.rfind('/');
        return slash == std::string::npos ? module : module.substr(slash + 1);
    }
    // "in outer (file:line) <- outermost (file:line)" for inlined sites, else "".
    std::string inlined_into() const {
        std::string s;
        for (std::size_t i = 1; i < frames.size(); ++i) {
            if (!s.empty()) s += " <- ";
            s += frames[i].function.empty() ? std::string("??") : frames[i].function;
            if (!frames[i].file.empty()) s += " (" + frames[i].file + ":" + std::to_string(frames[i].line) + ")";
        }
        return s;
    }
    // One line for text reports.
    std::string display() const {
        const std::string& fn = function();
        const std::string loc = location();
        return fn.empty() ? loc : fn + " (" + loc + ")";
    }
};

struct mapping {
    std::uint64_t start = 0, end = 0, offset = 0, inode = 0;
    std::string perms, path;
};

// Parses /proc/PID/maps text: "start-end perms offset dev inode [path]".
inline std::vector<mapping> parse_maps(std::string_view text) {
    std::vector<mapping> out;
    std::size_t pos = 0;
    while (pos < text.size()) {
        std::size_t eol = text.find('\n', pos);
        if (eol == std::string_view::npos) eol = text.size();
        const std::string line(text.substr(pos, eol - pos));
        pos = eol + 1;
        unsigned long long start = 0, end = 0, offset = 0, inode = 0;
        char perms[8] = {};
        char dev[32] = {};
        int consumed = 0;
        if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %31s %llu%n", &start, &end, perms, &offset, dev, &inode,
                        &consumed) < 6)
            continue;
        std::size_t p = static_cast<std::size_t>(consumed);
        while (p < line.size() && (line[p] == ' ' || line[p] == '\t')) ++p;
        mapping m{start, end, offset, inode, perms, line.substr(p)};
        // The kernel appends " (deleted)" to unlinked files.
        if (m.path.size() > 10 && m.path.ends_with(" (deleted)")) m.path.resize(m.path.size() - 10);
        if (end > start) out.push_back(std::move(m));
    }
    std::sort(out.begin(), out.end(), [](const mapping& a, const mapping& b) { return a.start < b.start; });
    return out;
}

struct symbolize_options {
    bool use_addr2line = true;
    std::string addr2line = "addr2line";  // looked up on PATH
};

struct symbolize_stats {
    std::size_t modules = 0;           // modules with at least one site
    std::size_t resolved_sites = 0;    // sites with a function or a file
    std::vector<std::string> failed;   // modules addr2line could not read (missing, changed, no tool)
    std::size_t outside_symbols = 0;   // sites whose nearest symbol ends before them: name dropped
};

namespace detail {

// ELF e_type of `path`: 2 = ET_EXEC, 3 = ET_DYN; 0 if not a readable ELF file.
inline int elf_type(const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return 0;
    unsigned char h[18] = {};
    const std::size_t n = std::fread(h, 1, sizeof h, f);
    std::fclose(f);
    if (n != sizeof h || h[0] != 0x7f || h[1] != 'E' || h[2] != 'L' || h[3] != 'F') return 0;
    return h[5] == 2 ? (h[16] << 8 | h[17]) : (h[16] | h[17] << 8);  // EI_DATA: 2 = big-endian
}

// [start, end) of the code symbols of an ELF file.
using extent = std::pair<std::uint64_t, std::uint64_t>;

template <class Ehdr, class Shdr, class Sym, unsigned char (*type_of)(unsigned char)>
std::vector<extent> read_symbol_extents(std::ifstream& f, std::uint64_t file_size) {
    std::vector<extent> out;
    Ehdr eh{};
    if (!f.seekg(0) || !f.read(reinterpret_cast<char*>(&eh), sizeof eh)) return out;
    if (eh.e_shoff == 0 || eh.e_shentsize != sizeof(Shdr) || eh.e_shoff > file_size) return out;
    auto section = [&](std::uint64_t i, Shdr& sh) {
        const std::uint64_t at = eh.e_shoff + i * sizeof(Shdr);
        return at + sizeof(Shdr) <= file_size && f.seekg(std::streamoff(at)) &&
               f.read(reinterpret_cast<char*>(&sh), sizeof sh);
    };
    std::uint64_t count = eh.e_shnum;
    if (count == 0) {  // extended numbering: the count is in section 0
        Shdr first{};
        if (!section(0, first)) return out;
        count = first.sh_size;
    }
    count = std::min<std::uint64_t>(count, (file_size - eh.e_shoff) / sizeof(Shdr));
    for (std::uint64_t i = 0; i < count; ++i) {
        Shdr sh{};
        if (!section(i, sh)) break;
        if ((sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) || sh.sh_entsize != sizeof(Sym) ||
            sh.sh_offset > file_size)
            continue;
        const std::uint64_t n = std::min<std::uint64_t>(sh.sh_size, file_size - sh.sh_offset) / sizeof(Sym);
        std::vector<Sym> syms(static_cast<std::size_t>(n));
        if (!f.seekg(std::streamoff(sh.sh_offset)) ||
            !f.read(reinterpret_cast<char*>(syms.data()), std::streamsize(n * sizeof(Sym))))
            continue;
        for (const Sym& y : syms) {
            const unsigned type = type_of(y.st_info);
            if (y.st_shndx == SHN_UNDEF || y.st_size == 0) continue;
            if (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_NOTYPE) continue;
            out.push_back({y.st_value, y.st_value + y.st_size});
        }
    }
    return out;
}

inline unsigned char elf64_type(unsigned char info) { return ELF64_ST_TYPE(info); }
inline unsigned char elf32_type(unsigned char info) { return ELF32_ST_TYPE(info); }

// The extents of the sized code symbols (functions; .symtab and .dynsym) of
// `path`, sorted and merged; empty if it is not a little-endian ELF file or
// has none. addr2line without debug info names an address after the nearest
// symbol before it, however far past that symbol's end: a stripped binary's
// static functions take the name of the exported one before them.
inline std::vector<extent> symbol_extents(const std::string& path) {
    std::ifstream f(path, std::ios::binary | std::ios::ate);
    if (!f) return {};
    const auto file_size = static_cast<std::uint64_t>(f.tellg());
    unsigned char id[EI_NIDENT] = {};
    if (!f.seekg(0) || !f.read(reinterpret_cast<char*>(id), sizeof id)) return {};
    if (std::memcmp(id, ELFMAG, SELFMAG) != 0 || id[EI_DATA] != ELFDATA2LSB) return {};
    std::vector<extent> v;
    if (id[EI_CLASS] == ELFCLASS64) v = read_symbol_extents<Elf64_Ehdr, Elf64_Shdr, Elf64_Sym, elf64_type>(f, file_size);
    else if (id[EI_CLASS] == ELFCLASS32)
        v = read_symbol_extents<Elf32_Ehdr, Elf32_Shdr, Elf32_Sym, elf32_type>(f, file_size);
    std::sort(v.begin(), v.end());
    std::vector<extent> merged;
    for (const auto& e : v) {
        if (!merged.empty() && e.first <= merged.back().second) merged.back().second = std::max(merged.back().second, e.second);
        else merged.push_back(e);
    }
    return merged;
}

inline bool inside_a_symbol(const std::vector<extent>& extents, std::uint64_t a) {
    auto it = std::upper_bound(extents.begin(), extents.end(), a,
                               [](std::uint64_t x, const extent& e) { return x < e.first; });
    return it != extents.begin() && a < std::prev(it)->second;
}

// Runs `tool -a -f -C -i -e file` with the addresses on stdin; returns false if
// it could not be run or failed.
inline bool run_addr2line(const std::string& tool, const std::string& file, const std::vector<std::uint64_t>& addrs,
                          std::string& output) {
    const char* tmpdir = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/allotheque-a2l-XXXXXX";
    std::vector<char> name(tmpl.begin(), tmpl.end());
    name.push_back('\0');
    const int in = ::mkstemp(name.data());
    if (in < 0) return false;
    ::unlink(name.data());
    std::string text;
    char buf[32];
    for (auto a : addrs) {
        std::snprintf(buf, sizeof buf, "0x%llx\n", static_cast<unsigned long long>(a));
        text += buf;
    }
    bool ok = true;
    for (std::size_t done = 0; ok && done < text.size();) {
        const ssize_t w = ::write(in, text.data() + done, text.size() - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) ok = false;
        else done += static_cast<std::size_t>(w);
    }
    if (!ok || ::lseek(in, 0, SEEK_SET) != 0) {
        ::close(in);
        return false;
    }
    const auto r = spawn_capture({tool, "-a", "-f", "-C", "-i", "-e", file}, environ, in, false, true);
    ::close(in);
    output = r.out;
    return r.started && r.status == 0;
}

inline bool parse_hex_line(const std::string& s, std::uint64_t& v) {
    if (s.size() < 3 || s[0] != '0' || s[1] != 'x') return false;
    char* end = nullptr;
    errno = 0;
    v = std::strtoull(s.c_str() + 2, &end, 16);
    return errno == 0 && end == s.c_str() + s.size();
}

// Parses `addr2line -a -f -i` output: for each address, the address line, then
// (function, file:line) pairs, innermost first.
inline std::vector<std::vector<frame>> parse_addr2line(const std::string& out, const std::vector<std::uint64_t>& addrs) {
    std::vector<std::vector<frame>> result(addrs.size());
    std::vector<std::string> lines;
    for (std::size_t pos = 0; pos < out.size();) {
        std::size_t eol = out.find('\n', pos);
        if (eol == std::string::npos) eol = out.size();
        lines.push_back(out.substr(pos, eol - pos));
        pos = eol + 1;
    }
    std::size_t k = 0;  // index of the address being read
    bool started = false;
    for (std::size_t i = 0; i < lines.size();) {
        std::uint64_t v = 0;
        // An address line starts the next address's group.
        if (parse_hex_line(lines[i], v) && (started ? k + 1 < addrs.size() && v == addrs[k + 1] : v == addrs[0])) {
            if (started) ++k;
            started = true;
            ++i;
            continue;
        }
        if (!started || i + 1 >= lines.size()) break;
        frame f;
        f.function = lines[i] == "??" ? std::string() : lines[i];
        std::string loc = lines[i + 1];
        if (const auto d = loc.find(" (discriminator"); d != std::string::npos) loc.resize(d);
        const auto colon = loc.rfind(':');
        if (colon != std::string::npos) {
            const std::string file = loc.substr(0, colon);
            const std::string line = loc.substr(colon + 1);
            if (file != "??" && !file.empty()) {
                f.file = file;
                f.line = static_cast<unsigned>(std::strtoul(line.c_str(), nullptr, 10));
            }
        }
        if (!f.function.empty() || !f.file.empty()) result[k].push_back(std::move(f));
        i += 2;
    }
    return result;
}

} // namespace detail

// Symbolises `sites` (return addresses) with the mappings in `maps` (the
// trace's MAPS text). The result is parallel to `sites`.
inline std::vector<symbol> symbolize(std::string_view maps, const std::vector<std::uint64_t>& sites,
                                     const symbolize_options& opt = {}, symbolize_stats* stats = nullptr) {
    std::vector<symbol> out(sites.size());
    const auto maplist = parse_maps(maps);
    // Module base = (lowest mapping start of the file) - (its file offset).
    std::map<std::string, std::uint64_t> base;
    for (const auto& m : maplist) {
        if (m.path.empty() || m.path[0] != '/') continue;
        if (!base.count(m.path)) base[m.path] = m.start - m.offset;  // sorted by start: first is lowest
    }
    std::map<std::string, std::vector<std::size_t>> by_module;
    for (std::size_t i = 0; i < sites.size(); ++i) {
        symbol& s = out[i];
        s.address = sites[i];
        if (sites[i] == 0) continue;
        const std::uint64_t a = sites[i] - 1;
        auto it = std::upper_bound(maplist.begin(), maplist.end(), a,
                                   [](std::uint64_t x, const mapping& m) { return x < m.start; });
        if (it == maplist.begin()) continue;
        --it;
        if (a >= it->end || it->path.empty()) continue;
        if (it->path[0] != '/') {  // [vdso], [heap], ...
            s.module = it->path;
            s.offset = sites[i] - it->start;
            continue;
        }
        s.module = it->path;
        s.offset = sites[i] - base[it->path];
        by_module[it->path].push_back(i);
    }
    symbolize_stats st;
    st.modules = by_module.size();
    for (auto& [path, idx] : by_module) {
        // A file replaced since the trace was recorded would give wrong names.
        std::uint64_t inode = 0;
        for (const auto& m : maplist)
            if (m.path == path && m.inode) inode = m.inode;
        struct stat sb {};
        const bool same_file = ::stat(path.c_str(), &sb) == 0 && (inode == 0 || std::uint64_t(sb.st_ino) == inode);
        const int type = same_file ? detail::elf_type(path) : 0;
        if (!opt.use_addr2line) continue;
        if (type != 2 && type != 3) {
            st.failed.push_back(path);
            continue;
        }
        std::vector<std::uint64_t> addrs;
        for (auto i : idx) addrs.push_back(type == 2 ? out[i].address - 1 : out[i].offset - 1);
        std::vector<std::uint64_t> unique = addrs;
        std::sort(unique.begin(), unique.end());
        unique.erase(std::unique(unique.begin(), unique.end()), unique.end());
        std::string text;
        if (!detail::run_addr2line(opt.addr2line, path, unique, text)) {
            st.failed.push_back(path);
            continue;
        }
        auto frames = detail::parse_addr2line(text, unique);
        // A name without a line number comes from the symbol table (the file
        // name, if any, from its STT_FILE entry), where addr2line takes the
        // nearest symbol before the address, even one that ends long before
        // it. Keep it only if a symbol covers the address: a wrong name is
        // worse than module+offset.
        std::vector<detail::extent> extents;
        bool have_extents = false;
        for (std::size_t u = 0; u < unique.size(); ++u) {
            auto& f = frames[u];
            if (f.empty() || std::any_of(f.begin(), f.end(), [](const frame& x) { return x.line != 0; })) continue;
            if (!have_extents) {
                extents = detail::symbol_extents(path);
                have_extents = true;
            }
            if (!detail::inside_a_symbol(extents, unique[u])) {
                f.clear();
                ++st.outside_symbols;
            }
        }
        for (std::size_t j = 0; j < idx.size(); ++j) {
            const auto u = std::lower_bound(unique.begin(), unique.end(), addrs[j]) - unique.begin();
            out[idx[j]].frames = frames[static_cast<std::size_t>(u)];
        }
    }
    for (const auto& s : out)
        if (!s.frames.empty()) ++st.resolved_sites;
    if (stats) *stats = std::move(st);
    return out;
}

// No lookup at all: module+offset from the maps only.
inline std::vector<symbol> symbolize_modules_only(std::string_view maps, const std::vector<std::uint64_t>& sites) {
    symbolize_options o;
    o.use_addr2line = false;
    return symbolize(maps, sites, o);
}

} // namespace allotheque::tools

#endif
