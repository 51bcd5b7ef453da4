#include "autograd/Precision.h"

#include <atomic>

#include "core/Error.h"

namespace dtrain::autograd {
namespace {
std::atomic<Precision> gPrecision{Precision::FP32};
}  // namespace

void setPrecision(Precision p) { gPrecision.store(p, std::memory_order_relaxed); }
Precision precision() { return gPrecision.load(std::memory_order_relaxed); }

const std::vector<std::string>& precisionNames() {
  static const std::vector<std::string> names{"fp32", "bf16"};
  return names;
}

Precision parsePrecision(const std::string& name) {
  if (name == "fp32") return Precision::FP32;
  if (name == "bf16") return Precision::BF16;
  if (name == "fp16")
    throw UsageError("--precision fp16 needs a GPU backend (CPUs here have no fp16 arithmetic); "
                     "use bf16");
  throw UsageError("unknown precision '" + name + "' (known: fp32, bf16)");
}

}  // namespace dtrain::autograd
