#include "core/Timer.h"

namespace dtrain {
double nowMicros() {
  static const auto origin = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - origin).count();
}
}  // namespace dtrain
