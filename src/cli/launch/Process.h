#pragma once
// Child processes of the launcher: helper commands (netsim.sh, ssh probes) and
// where to find dtrain itself and scripts/netsim.sh.
#include <string>
#include <vector>

namespace dtrain::cli::launch {

// argv for execvp (pointers into `args`, null-terminated).
std::vector<char*> argvOf(std::vector<std::string>& args);
// Runs a helper command with its stdout on our stderr (stdout carries only the
// result line); quiet: both to /dev/null. Returns its exit code (128 + signal).
int runToStderr(std::vector<std::string> args, bool quiet = false);
// This program (/proc/self/exe), so that the ranks run the same dtrain.
std::string selfExe();
// DTRAIN_NETSIM_SH, else the source tree's scripts/netsim.sh (UsageError when none).
std::string netsimScript();

}  // namespace dtrain::cli::launch
