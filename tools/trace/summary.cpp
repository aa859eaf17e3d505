// allotheque-trace summary: the text report (and --html FILE) of a trace.
// The analysis lives in summary.hpp so the tests can call it directly.
#include <cstdio>

#include "commands.hpp"
#include "summary.hpp"

namespace allotheque::tools {

int cmd_summary(int argc, char** argv) { return summary_main(argc, argv, stdout, stderr); }

} // namespace allotheque::tools
