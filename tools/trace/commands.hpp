// The subcommands of allotheque-trace. Each returns the process exit status:
// 0 success, 1 failure (message on stderr), 2 bad usage.
#pragma once

namespace allotheque::tools {

int cmd_record(int argc, char** argv);   // record.cpp
int cmd_summary(int argc, char** argv);  // summary.cpp
int cmd_replay(int argc, char** argv);   // replay.cpp

} // namespace allotheque::tools
