#include "cli/launch/Process.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "core/Error.h"

namespace dtrain::cli::launch {

std::vector<char*> argvOf(std::vector<std::string>& args) {
  std::vector<char*> v;
  for (auto& a : args) v.push_back(a.data());
  v.push_back(nullptr);
  return v;
}

int runToStderr(std::vector<std::string> args, bool quiet) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw Error("launch: fork failed");
  if (pid == 0) {
    ::dup2(2, 1);
    if (quiet) {
      std::FILE* null = std::fopen("/dev/null", "w");
      if (null) ::dup2(::fileno(null), 1), ::dup2(::fileno(null), 2);
    }
    auto argv = argvOf(args);
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string selfExe() {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("dtrain") : p.string();
}

std::string netsimScript() {
  if (const char* s = std::getenv("DTRAIN_NETSIM_SH"); s && *s) return s;
#ifdef DTRAIN_SOURCE_DIR
  if (std::filesystem::exists(DTRAIN_SOURCE_DIR "/scripts/netsim.sh")) return DTRAIN_SOURCE_DIR "/scripts/netsim.sh";
#endif
  throw UsageError("launch --netsim: scripts/netsim.sh not found; set DTRAIN_NETSIM_SH=PATH");
}

}  // namespace dtrain::cli::launch
