#include "calibrate/Compute.h"

#include <vector>

#include "calibrate/Fit.h"
#include "core/Rng.h"
#include "core/Timer.h"
#include "tensor/cpu/Bf16.h"
#include "tensor/cpu/Blas.h"

namespace dtrain::calibrate {

double gemmFlopsPerS(bool bf16, int64_t n, double seconds) {
  std::vector<float> A(n * n), B(n * n), C(n * n);
  Rng rng(7);
  for (auto& a : A) a = rng.uniform() - 0.5f;
  for (auto& b : B) b = rng.uniform() - 0.5f;
  std::vector<BFloat16> Ah(A.size()), Bh(B.size());
  kernels::toBf16(A.data(), Ah.data(), n * n);
  kernels::toBf16(B.data(), Bh.data(), n * n);
  auto run = [&] {
    if (bf16)
      kernels::gemmBf16(false, true, n, n, n, 1.f, Ah.data(), n, Bh.data(), n, 0.f, C.data(), n);
    else
      kernels::gemm(false, true, n, n, n, 1.f, A.data(), n, B.data(), n, 0.f, C.data(), n);
  };
  run();  // primitive creation, page faults
  std::vector<double> perCall;
  for (int rep = 0; rep < 5; ++rep) {
    int calls = 0;
    Timer t;
    do {
      run();
      ++calls;
    } while (t.seconds() < seconds / 5);
    perCall.push_back(t.seconds() / calls);
  }
  return 2.0 * static_cast<double>(n) * n * n / median(perCall);
}

double streamBytesPerS(int64_t bytesPerArray) {
  const int64_t count = bytesPerArray / static_cast<int64_t>(sizeof(float));
  std::vector<float> a(count, 0.f), b(count, 1.f), c(count, 2.f);
  const float s = 0.5f;
  std::vector<double> passes;
  for (int pass = 0; pass < 6; ++pass) {
    Timer t;
    float* __restrict pa = a.data();
    const float* __restrict pb = b.data();
    const float* __restrict pc = c.data();
    for (int64_t i = 0; i < count; ++i) pa[i] = pb[i] + s * pc[i];
    const double secs = t.seconds();
    if (pass > 0) passes.push_back(3.0 * static_cast<double>(bytesPerArray) / secs);  // pass 0 warms up
    b[pass % count] = a[(pass * 7) % count];  // a depends on every pass: nothing is hoisted
  }
  return median(passes);
}

ComputeRates measureCompute(bool small) {
  ComputeRates r;
  const int64_t n = small ? 256 : 1024;
  const double seconds = small ? 0.05 : 1.0;
  r.fp32FlopsPerS = gemmFlopsPerS(false, n, seconds);
  r.bf16FlopsPerS = gemmFlopsPerS(true, n, seconds);
  r.memoryBytesPerS = streamBytesPerS(small ? (int64_t{8} << 20) : (int64_t{64} << 20));
  return r;
}

}  // namespace dtrain::calibrate
