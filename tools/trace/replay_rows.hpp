// The rows of `allotheque-trace replay` (docs/trace.md, "Replay": the table of
// rows, and "Using the winner"): what each one runs, and what a user does to
// adopt it when it wins. Apart from the CLI so that tests/test_trace_replay.cpp can check
// every type named here against the headers: the C++ lines printed for a
// heap must compile, and a malloc declaration said to be a shipped library's
// must be that library's.
#ifndef ALLOTHEQUE_TOOLS_TRACE_REPLAY_ROWS_HPP
#define ALLOTHEQUE_TOOLS_TRACE_REPLAY_ROWS_HPP

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace allotheque::tools::replay {

enum class row_kind {
    system_malloc,      // glibc: the worker's own malloc
    peer_malloc,        // jemalloc, mimalloc, tcmalloc: their distribution's library preloaded
    allotheque_malloc,  // malloc-<heap>: liballotheque_malloc_<heap>.so preloaded
    heap,               // a header-only heap, called directly
    pmr,                // std::pmr::unsynchronized_pool_resource
};

struct row_info {
    const char* name;  // in --allocators, the table and the JSON
    row_kind kind;
    // peer_malloc: the library's file name. allotheque_malloc: the name the
    // library reports (allotheque_malloc_heap_name), which is also its file's
    // suffix: liballotheque_malloc_<library>.so.
    const char* library = nullptr;
    // Header-only heaps only.
    const char* header = nullptr;       // what declares `type`
    const char* type = nullptr;         // the type the worker replays
    const char* malloc_heap = nullptr;  // the nearest heap ALLOTHEQUE_DEFINE_MALLOC accepts
    const char* malloc_row = nullptr;   // the shipped library closest to malloc_heap, as its row
    // What that library is, next to a declaration of malloc_heap: a
    // predicate, "is that malloc" when it declares exactly malloc_heap.
    const char* malloc_row_is = "is that malloc";
};

// The header-only rows' malloc_heap strings are spelt exactly as the types
// the test checks (tests/test_trace_replay.cpp stringifies them).
inline constexpr row_info rows[] = {
    {"glibc", row_kind::system_malloc},
    {"jemalloc", row_kind::peer_malloc, "libjemalloc.so.2"},
    {"mimalloc", row_kind::peer_malloc, "libmimalloc.so.2"},
    {"tcmalloc", row_kind::peer_malloc, "libtcmalloc_minimal.so.4"},
    // The shipped malloc libraries (include/allotheque/malloc/shipped.hpp).
    {"malloc-segregated", row_kind::allotheque_malloc, "segregated"},
    {"malloc-quickfit", row_kind::allotheque_malloc, "quickfit"},
    {"malloc-kingsley", row_kind::allotheque_malloc, "kingsley"},
    {"malloc-velox", row_kind::allotheque_malloc, "velox"},
    {"malloc-medius", row_kind::allotheque_malloc, "medius"},
    {"malloc-lea", row_kind::allotheque_malloc, "lea"},
    {"pmr", row_kind::pmr},
    {"segregated", row_kind::heap, nullptr, "allotheque/allocators/segregated.hpp", "allotheque::segregated_heap<>",
     "allotheque::segregated_heap<allotheque::arena_source, allotheque::malloc_options>", "malloc-segregated"},
    {"kingsley", row_kind::heap, nullptr, "allotheque/allocators/kingsley.hpp", "allotheque::kingsley_heap<>",
     "allotheque::kingsley_heap<allotheque::arena_source, allotheque::malloc_options>", "malloc-kingsley"},
    // A malloc's blocks are 16-byte aligned: QuickFit's classes step by 16, not 8.
    {"quickfit", row_kind::heap, nullptr, "allotheque/allocators/quickfit.hpp", "allotheque::quickfit_heap<>",
     "allotheque::quickfit_heap<allotheque::arena_source, allotheque::malloc_options, 16, 128>", "malloc-quickfit"},
    {"velox", row_kind::heap, nullptr, "allotheque/allocators/velox.hpp", "allotheque::velox_heap<>",
     "allotheque::velox_heap<allotheque::arena_source, allotheque::malloc_options>", "malloc-velox",
     "is that malloc with one-page spans over the segregated size classes, a table of them per vicinity, "
     "and no hint (velox_classed_partition; allotheque::malloc_declarations::velox in "
     "<allotheque/malloc/shipped.hpp>)"},
    {"medius", row_kind::heap, nullptr, "allotheque/allocators/medius.hpp", "allotheque::medius_heap<>",
     "allotheque::medius_heap<allotheque::arena_source, allotheque::malloc_options>", "malloc-medius",
     "is that malloc over the segregated size classes, each page's in two tagged stacks, and no hint "
     "(medius_classed_partition; allotheque::malloc_declarations::medius in <allotheque/malloc/shipped.hpp>)"},
    // Defero's classes step by 8 too.
    {"defero", row_kind::heap, nullptr, "allotheque/allocators/defero.hpp", "allotheque::defero_heap<>",
     "allotheque::heap<allotheque::defero_partition<12, 16>, allotheque::arena_source, allotheque::malloc_options>"},
    {"lea", row_kind::heap, nullptr, "allotheque/allocators/lea.hpp", "allotheque::lea_heap<>",
     "allotheque::lea_heap<allotheque::arena_source, allotheque::malloc_options>", "malloc-lea",
     "is Lea with fast bins instead, lea_deferred_heap, and spans of 128 KiB at least (lea_malloc_config; "
     "allotheque::malloc_declarations::lea in <allotheque/malloc/shipped.hpp>)"},
    {"lea_deferred", row_kind::heap, nullptr, "allotheque/allocators/lea.hpp", "allotheque::lea_deferred_heap<>",
     "allotheque::lea_deferred_heap<allotheque::arena_source, allotheque::malloc_options>", "malloc-lea",
     "is that malloc with spans of 128 KiB at least, so that realloc grows a buffer to the large threshold "
     "in place (lea_malloc_config; allotheque::malloc_declarations::lea in <allotheque/malloc/shipped.hpp>)"},
    {"kingsley_coalescing", row_kind::heap, nullptr, "allotheque/allocators/kingsley_coalescing.hpp",
     "allotheque::kingsley_coalescing_heap<>",
     "allotheque::kingsley_coalescing_heap<allotheque::arena_source, allotheque::malloc_options>"},
};

inline const row_info* find_row(std::string_view name) noexcept {
    for (const row_info& r : rows)
        if (name == r.name) return &r;
    return nullptr;
}

// The table's "kind" column.
inline const char* kind_label(row_kind k) noexcept {
    switch (k) {
        case row_kind::system_malloc: return "system malloc";
        case row_kind::peer_malloc:
        case row_kind::allotheque_malloc: return "preloaded malloc";
        case row_kind::heap: return "header-only heap";
        case row_kind::pmr: return "std::pmr pool";
    }
    return "?";
}

// The JSON's "kind".
inline const char* kind_id(row_kind k) noexcept {
    switch (k) {
        case row_kind::system_malloc: return "system-malloc";
        case row_kind::peer_malloc: return "preloaded-malloc";
        case row_kind::allotheque_malloc: return "allotheque-malloc";
        case row_kind::heap: return "header-only-heap";
        case row_kind::pmr: return "pmr";
    }
    return "?";
}

inline std::string allotheque_malloc_file(const row_info& r) {
    return std::string("liballotheque_malloc_") + r.library + ".so";
}

// A word as a POSIX shell reads it back: as is when it holds nothing the
// shell would interpret, else single-quoted.
inline std::string shell_quote(std::string_view w) {
    if (w.empty()) return "''";
    bool plain = true;
    for (const char c : w)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              std::string_view("_-./=:,+@%").find(c) != std::string_view::npos))
            plain = false;
    if (plain) return std::string(w);
    std::string q = "'";
    for (const char c : w) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

// The traced program's command line, ready to paste; "PROGRAM" when the
// trace does not say (a trace built by hand).
inline std::string command_line(const std::vector<std::string>& args) {
    if (args.empty()) return "PROGRAM";
    std::string s;
    for (const auto& a : args) {
        if (!s.empty()) s += ' ';
        s += shell_quote(a);
    }
    return s;
}

// What the CLI knows beyond the row itself.
struct usage_context {
    std::string library;                // the absolute path preloaded for this row (malloc rows)
    std::vector<std::string> command;   // the traced program's command line
    std::string malloc_row_library;     // heap rows: the absolute path of malloc_row's library, if found
    std::string malloc_row_result;      // heap rows: what malloc_row measured in this replay, if it ran
    std::string malloc_row_missing;     // heap rows: why malloc_row did not run ("": not asked for)
};

// How to use a row: a sentence, then lines to paste (shell or C++), and the
// same split out for the JSON.
struct usage {
    std::vector<std::string> text;  // sentences end with ':' when code lines follow
    std::vector<std::string> code;  // code lines of text, in order (each also in text, indented)
    std::string preload;            // the LD_PRELOAD command line, if the row is a preloaded malloc
    std::string cxx;                // the C++ lines that declare it, '\n'-separated
    std::string malloc_cxx;         // heap rows: the .cpp that makes it a malloc
    std::string cmake;              // heap rows: the CMake line that builds that .cpp
};

// Appends `line` to a '\n'-separated block.
inline void append_line(std::string& block, const std::string& line) {
    if (!block.empty()) block += '\n';
    block += line;
}

inline usage how_to_use(const row_info& r, const usage_context& c) {
    usage u;
    auto say = [&](std::string s) { u.text.push_back(std::move(s)); };
    auto code = [&](std::string s) {
        u.text.push_back("  " + s);
        u.code.push_back(std::move(s));
    };
    const std::string cmd = command_line(c.command);
    switch (r.kind) {
        case row_kind::system_malloc:
            say(std::string(r.name) + " is the system malloc: run the program as it is.");
            break;
        case row_kind::peer_malloc:
        case row_kind::allotheque_malloc: {
            const std::string lib = c.library.empty() ? std::string(r.library) : c.library;
            if (r.kind == row_kind::allotheque_malloc)
                say(std::string(r.name) + " is allotheque's malloc library " + allotheque_malloc_file(r) +
                    ", replayed as it runs preloaded; run the program with it:");
            else
                say(std::string(r.name) + " is a malloc library, replayed preloaded; run the program with it:");
            u.preload = "LD_PRELOAD=" + shell_quote(lib) + " " + cmd;
            code(u.preload);
            break;
        }
        case row_kind::pmr:
            say("pmr is std::pmr::unsynchronized_pool_resource over new/delete, for the containers that take it "
                "(single-threaded; std::pmr::synchronized_pool_resource otherwise):");
            u.cxx = "#include <memory_resource>\n"
                    "std::pmr::unsynchronized_pool_resource pool;\n"
                    "std::pmr::vector<int> v(&pool);  // any std::pmr container";
            for (std::size_t i = 0, j; i <= u.cxx.size(); i = j + 1) {
                j = std::min(u.cxx.find('\n', i), u.cxx.size());
                code(u.cxx.substr(i, j - i));
            }
            break;
        case row_kind::heap: {
            say(std::string(r.name) + " is a header-only heap, " + r.type +
                ", called directly (not a malloc); in C++:");
            const std::vector<std::string> direct = {
                std::string("#include <") + r.header + ">",
                std::string("using heap = ") + r.type + ";  // single-threaded: one per thread, or "
                                                            "allotheque::layers::per_thread<heap>",
                "heap h;  // h.allocate(allotheque::request{n}), h.deallocate(p, allotheque::request{n}); "
                "containers: allotheque::allocator<T, heap>{h}"};
            for (const auto& l : direct) {
                append_line(u.cxx, l);
                code(l);
            }
            say("or as the program's malloc (with allotheque::malloc_options: 16-byte granularity, double-free "
                "marks), one .cpp file, my_malloc.cpp:");
            const std::vector<std::string> decl = {"#include <allotheque/malloc.hpp>",
                                                   std::string("#include <") + r.header + ">",
                                                   "struct my_malloc {",
                                                   std::string("    using heap = ") + r.malloc_heap + ";",
                                                   std::string("    static constexpr const char* name = \"my-") +
                                                       r.name + "\";",
                                                   "};",
                                                   "ALLOTHEQUE_DEFINE_MALLOC(my_malloc);"};
            for (const auto& l : decl) {
                append_line(u.malloc_cxx, l);
                code(l);
            }
            say("built by one CMake line (after find_package(allotheque)), then preloaded:");
            u.cmake = "allotheque_add_malloc(my_malloc SOURCES my_malloc.cpp)";
            code(u.cmake);
            code("LD_PRELOAD=/path/to/build/libmy_malloc.so " + cmd);
            if (r.malloc_row) {
                const row_info* m = find_row(r.malloc_row);
                std::string s = "The shipped " + (m ? allotheque_malloc_file(*m) : std::string(r.malloc_row)) + " " +
                                r.malloc_row_is + "; its row " + r.malloc_row;
                if (!c.malloc_row_result.empty())
                    s += " measured it here: " + c.malloc_row_result + ".";
                else if (!c.malloc_row_missing.empty())
                    s += " did not run here: " + c.malloc_row_missing + ".";
                else
                    s += std::string(" did not run here (replay with --allocators ...,") + r.malloc_row +
                         " to measure it as a malloc).";
                if (!c.malloc_row_library.empty()) {
                    say(s + " Preloaded:");
                    code("LD_PRELOAD=" + shell_quote(c.malloc_row_library) + " " + cmd);
                } else {
                    say(s);
                }
            } else {
                say("No shipped malloc library is built on this heap: a heap's figures here are those of the "
                    "heap called directly, not of it as a malloc.");
            }
            break;
        }
    }
    return u;
}

} // namespace allotheque::tools::replay

#endif
