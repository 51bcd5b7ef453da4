#include "cli/WaitPolicy.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace dtrain::cli {

namespace {

bool isSet(const char* name) {
  const char* v = std::getenv(name);
  return v && *v;
}

}  // namespace

void restartWithPassiveOpenMpWait(char** argv) {
  if (isSet("OMP_WAIT_POLICY") || isSet("GOMP_SPINCOUNT")) return;  // the user's choice
  if (const char* n = std::getenv("OMP_NUM_THREADS"); n && std::strcmp(n, "1") == 0) return;
  if (::setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
  ::execv("/proc/self/exe", argv);
  ::unsetenv("OMP_WAIT_POLICY");  // no restart: go on with the policy this process has
}

}  // namespace dtrain::cli
