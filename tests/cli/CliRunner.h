#pragma once
// Runs the dtrain binary as a user would and captures exit code, stdout, stderr.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace dtrain::test {

struct CliResult {
  int code = -1;
  std::string out, err;
  std::string lastLine() const {
    auto end = out.find_last_not_of('\n');
    if (end == std::string::npos) return "";
    auto start = out.rfind('\n', end);
    return out.substr(start == std::string::npos ? 0 : start + 1, end - (start == std::string::npos ? 0 : start + 1) + 1);
  }
};

inline std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

inline std::string tempDir() {
  char tmpl[] = "/tmp/dtrain-test-XXXXXX";
  const char* d = mkdtemp(tmpl);
  return d ? d : "/tmp";
}

// Runs `command` through the shell (stdin closed) with its output captured.
inline CliResult runShell(const std::string& command) {
  static int counter = 0;
  std::string base = tempDir() + "/run" + std::to_string(counter++);
  std::string cmd = command + " </dev/null >" + base + ".out 2>" + base + ".err";
  int status = std::system(cmd.c_str());
  CliResult r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(base + ".out");
  r.err = slurp(base + ".err");
  return r;
}

inline CliResult runDtrain(const std::string& args) {
  return runShell(std::string(DTRAIN_BIN) + " " + args);
}

// A failed run: exit code `code`, one line on stderr containing `needle`, nothing on stdout.
inline void expectError(const CliResult& r, int code, const std::string& needle) {
  EXPECT_EQ(r.code, code) << "stderr: " << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr: " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "stderr: " << r.err;
  EXPECT_EQ(r.out, "");
}

}  // namespace dtrain::test
