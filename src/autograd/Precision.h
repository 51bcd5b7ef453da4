#pragma once
// Mixed precision, as an autocast: the precision in which the matrix products
// of linear layers and convolutions run. Parameters, their gradients and
// optimizer state stay fp32 whatever is set; under bf16, linear layers and
// convolutions multiply bf16 copies of their input and weight with fp32
// accumulation, and keep those bf16 copies (half the bytes) for backward.
// Elementwise ops, softmax, normalization and losses run in fp32.
// Process-wide: ranks that are threads of one process train alike.
#include <string>
#include <vector>

namespace dtrain::autograd {

enum class Precision { FP32, BF16 };

void setPrecision(Precision p);
Precision precision();

// "fp32" or "bf16"; a UsageError names the choices (and says where fp16 belongs).
Precision parsePrecision(const std::string& name);
const std::vector<std::string>& precisionNames();

// Sets a precision for a scope and restores the previous one.
class PrecisionScope {
 public:
  explicit PrecisionScope(Precision p) : saved_(precision()) { setPrecision(p); }
  ~PrecisionScope() { setPrecision(saved_); }
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  Precision saved_;
};

}  // namespace dtrain::autograd
