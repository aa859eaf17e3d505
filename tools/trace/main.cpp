// allotheque-trace: record a program's allocations, summarise the trace, and
// replay it against every allocator to choose one (docs/trace.md).
#include <cstdio>
#include <cstring>
#include <string>

#include "commands.hpp"

namespace {

int usage(std::FILE* out) {
    std::fputs(
        "usage: allotheque-trace record  [-o FILE] [--] PROGRAM [ARGS...]\n"
        "       allotheque-trace summary [--top N] [--html FILE] [--allow-truncated] TRACE\n"
        "       allotheque-trace replay  [--allocators A,B,...] [--repeat N] [--json FILE] [--allow-truncated] TRACE\n"
        "       allotheque-trace help\n"
        "Each command prints its own options with --help.\n",
        out);
    return out == stdout ? 0 : 2;
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 2) return usage(stderr);
    const std::string cmd = argv[1];
    // Each command sees its own name as argv[0].
    if (cmd == "record") return allotheque::tools::cmd_record(argc - 1, argv + 1);
    if (cmd == "summary") return allotheque::tools::cmd_summary(argc - 1, argv + 1);
    if (cmd == "replay") return allotheque::tools::cmd_replay(argc - 1, argv + 1);
    if (cmd == "help" || cmd == "--help" || cmd == "-h") return usage(stdout);
    std::fprintf(stderr, "allotheque-trace: unknown command '%s'\n", cmd.c_str());
    return usage(stderr);
}
