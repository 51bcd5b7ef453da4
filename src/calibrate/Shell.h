#pragma once
// The shell commands calibrate runs (mpirun, scripts/netsim.sh, its own
// binary in an internal mode) and the temporary files they answer in.
#include <string>
#include <vector>

namespace dtrain::calibrate {

// `s` as one single-quoted shell word.
std::string shellQuote(const std::string& s);

// Runs `cmd` under /bin/sh; a non-zero exit throws dtrain::Error naming `what`
// (the command's own error is on stderr above it).
void runShell(const std::string& cmd, const std::string& what);

// Runs `commands` at once, each in the background of one /bin/sh, and waits
// for all of them; one that fails throws as runShell does.
void runShellAtOnce(const std::vector<std::string>& commands, const std::string& what);

// A file in /tmp for this process and `tag`.
std::string tempFile(const std::string& tag);

}  // namespace dtrain::calibrate
