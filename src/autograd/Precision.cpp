#include "autograd/Precision.h"

#include <atomic>

#include "core/Error.h"
#include "core/NameRegistry.h"

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
  static const NameRegistry<Precision> precisions(
      "precision", {{"fp32", Precision::FP32}, {"bf16", Precision::BF16}});
  if (name == "fp16")
    throw UsageError("--precision fp16 needs a GPU backend (CPUs here have no fp16 arithmetic); "
                     "use bf16");
  return precisions.find(name);
}

}  // namespace dtrain::autograd
