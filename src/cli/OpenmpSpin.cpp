// oneDNN's products run on an OpenMP team (libgomp). Between two products the
// team's threads spin for GOMP_SPINCOUNT iterations (300,000 by default, about a
// millisecond) before they sleep, while dtrain's own pool runs the kernels in
// between (convolutions, elementwise ops) on the same cores: the spinning
// threads took their cores, and lenet at --threads 2 ran slower than at 1
// (22k vs 27k samples/s on a 2-core AMD EPYC). With 10,000 iterations the
// team still wakes fast for back-to-back products (mlp at 2 threads: 104k ->
// 111k samples/s) and frees the cores in time (lenet 2 threads: 22k -> 29k).
// libgomp reads the variable in its constructor, before main, and no API sets
// it later (setting it from the executable's .preinit_array is undone when libc
// initializes its environment), so the process re-executes itself once with it
// set: about 20 ms, paid only by multi-threaded runs. A user's own
// OMP_WAIT_POLICY or GOMP_SPINCOUNT is left alone.
#include "cli/OpenmpSpin.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace dtrain::cli {
namespace {

bool multiThreaded(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    std::string value;
    if (a == "--threads" && i + 1 < argc) value = argv[i + 1];
    else if (a.rfind("--threads=", 0) == 0) value = a.substr(10);
    else continue;
    char* end = nullptr;
    const long n = std::strtol(value.c_str(), &end, 10);
    return end && *end == '\0' && n > 1;
  }
  return false;
}

}  // namespace

void shortenOpenmpSpin(int argc, char** argv) {
  if (std::getenv("GOMP_SPINCOUNT") || std::getenv("OMP_WAIT_POLICY")) return;
  if (!multiThreaded(argc, argv)) return;
  if (setenv("GOMP_SPINCOUNT", "10000", 1) != 0) return;
  execv("/proc/self/exe", argv);
  unsetenv("GOMP_SPINCOUNT");  // exec failed: go on as we are
}

}  // namespace dtrain::cli
