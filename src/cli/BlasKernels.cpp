#include "cli/BlasKernels.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

extern "C" char* openblas_get_corename(void);

namespace dtrain::cli {

void preferAvx512Blas(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE")) return;
  const char* opt = std::getenv("DTRAIN_BLAS_AUTO");
  if (opt && std::strcmp(opt, "0") == 0) return;
  const char* core = openblas_get_corename();
  if (!core || std::strcmp(core, "Haswell") != 0) return;
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
      !__builtin_cpu_supports("avx512dq") || !__builtin_cpu_supports("avx512vl"))
    return;
  setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
  execv("/proc/self/exe", argv);
  unsetenv("OPENBLAS_CORETYPE");  // exec failed: go on with the default kernels
}

}  // namespace dtrain::cli
