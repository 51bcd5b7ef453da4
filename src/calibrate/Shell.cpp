#include "calibrate/Shell.h"

#include <cstdlib>
#include <sys/wait.h>
#include <unistd.h>

#include "core/Error.h"

namespace dtrain::calibrate {

std::string shellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

void runShell(const std::string& cmd, const std::string& what) {
  const int status = std::system(cmd.c_str());
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  DTRAIN_CHECK(status == 0, "calibrate: ", what, " failed (exit code ", code,
               "; its own error is on the lines above)");
}

void runShellAtOnce(const std::vector<std::string>& commands, const std::string& what) {
  std::string script = "pids=; ";
  for (const auto& cmd : commands) script += cmd + " & pids=\"$pids $!\"; ";
  runShell(script + "rc=0; for p in $pids; do wait $p || rc=1; done; exit $rc", what);
}

std::string tempFile(const std::string& tag) {
  return "/tmp/dtrain-calibrate-" + std::to_string(::getpid()) + "-" + tag + ".json";
}

}  // namespace dtrain::calibrate
