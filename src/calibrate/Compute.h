#pragma once
// What one device (a core, with --threads 1) computes: the dense GEMM rate per
// precision and the streaming memory rate.
#include <cstdint>

namespace dtrain::calibrate {

struct ComputeRates {
  double fp32FlopsPerS = 0;
  double bf16FlopsPerS = 0;  // bf16 operands, fp32 accumulation (kernels::gemmBf16)
  double memoryBytesPerS = 0;
};

// GEMM FLOP/s of an n x n x n product (2 n^3 per call), fp32 (kernels::gemm,
// as the models' Linear layers run it) or bf16; the median of 5 timed runs of
// at least `seconds`/5 each, after one warm-up call.
double gemmFlopsPerS(bool bf16, int64_t n, double seconds);

// STREAM's triad a = b + s c over three arrays of `bytesPerArray` (beyond the
// caches), counting 3 arrays per pass like STREAM; the median of 5 passes.
double streamBytesPerS(int64_t bytesPerArray);

// Both GEMMs and the stream rate with the defaults calibrate uses (n = 1024;
// `small`: n = 256 and 8 MiB arrays, for tests).
ComputeRates measureCompute(bool small);

}  // namespace dtrain::calibrate
