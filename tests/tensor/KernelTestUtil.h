#pragma once
// Helpers for the CPU kernel tests: seeded random data and tolerant comparisons.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tensor/cpu/Conv.h"

namespace dtrain::testutil {

inline std::vector<float> randomVector(int64_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(gen);
  return v;
}

// |a - b| <= atol + rtol * |b| element by element; reports the first mismatch.
inline void expectAllNear(const std::vector<float>& actual, const std::vector<float>& expected,
                          double atol, double rtol, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i], e = expected[i];
    if (std::isnan(e)) {
      ASSERT_TRUE(std::isnan(a)) << what << " at " << i;
      continue;
    }
    ASSERT_LE(std::abs(a - e), atol + rtol * std::abs(e))
        << what << " at " << i << ": got " << a << ", expected " << e;
  }
}

// Central finite-difference gradient of the scalar loss(x) with respect to x,
// computed in double by perturbing one float at a time.
inline std::vector<float> numericGrad(std::vector<float> x,
                                      const std::function<double(const std::vector<float>&)>& loss,
                                      float eps = 1e-2f) {
  std::vector<float> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float keep = x[i];
    x[i] = keep + eps;
    const double up = loss(x);
    x[i] = keep - eps;
    const double down = loss(x);
    x[i] = keep;
    g[i] = static_cast<float>((up - down) / (2.0 * eps));
  }
  return g;
}

// sum(a * b) in double: the loss whose gradient with respect to the output is b.
inline double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// "N7 Cin3 13x13 Cout7 k3x3 s2x2 p1x1": a convolution's shape in a failure message.
inline std::string describe(const kernels::ConvShape& s) {
  std::ostringstream os;
  os << "N" << s.N << " Cin" << s.Cin << " " << s.H << "x" << s.W << " Cout" << s.Cout << " k"
     << s.KH << "x" << s.KW << " s" << s.strideH << "x" << s.strideW << " p" << s.padH << "x"
     << s.padW;
  return os.str();
}

}  // namespace dtrain::testutil
