// GFLOP/s of dtrain's GEMM backends (oneDNN, OpenBLAS) on the products the
// models really run (mlp, lenet's classifier, gpt-small at batch 16 x 128), and
// on a large square product (the machine's single-core sgemm limit); and the
// bf16 products of --precision bf16 (kernels::gemmBf16: bf16 operands, fp32 C).
//   gemm_bench [--threads 1] [--min-ms 200]
// One line per product and backend on stderr; one JSON line per product on stdout.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/Rng.h"
#include "tensor/cpu/Bf16.h"
#include "tensor/cpu/Blas.h"

using namespace dtrain;
using Clock = std::chrono::steady_clock;

namespace {

struct Product {
  const char* name;
  bool ta, tb;
  int64_t M, N, K;
};

// Forward y = x W^T (tb), dX = gy W, dW = gy^T x (ta), as autograd/ops/Linear.cpp runs them.
const Product kProducts[] = {
    {"large 2048^3", false, false, 2048, 2048, 2048},
    {"mlp fc1 fwd", false, true, 64, 256, 784},
    {"mlp fc1 dW", true, false, 256, 784, 64},
    {"mlp fc2 fwd", false, true, 64, 256, 256},
    {"mlp fc2 dX", false, false, 64, 256, 256},
    {"mlp fc2 dW", true, false, 256, 256, 64},
    {"gpt qkv fwd", false, true, 2048, 384, 128},
    {"gpt qkv dX", false, false, 2048, 128, 384},
    {"gpt qkv dW", true, false, 384, 128, 2048},
    {"gpt fc fwd", false, true, 2048, 512, 128},
    {"gpt proj fwd", false, true, 2048, 128, 512},
    {"gpt proj dX", false, false, 2048, 512, 128},
    {"gpt proj dW", true, false, 128, 512, 2048},
    {"gpt lm_head fwd", false, true, 2048, 256, 128},
    {"fedavg fc1 fwd", false, true, 10, 256, 784},  // a FedAvg client's batch of 10
    {"fedavg fc1 dW", true, false, 256, 784, 10},
    {"fedavg fc2 dX", false, false, 10, 256, 256},
    {"attn tile QK^T", false, true, 64, 64, 32},
    {"attn tile PV", false, false, 64, 32, 64},
};

// GFLOP/s of p: fp32 on `backend`, or bf16 operands (gemmBf16) when bf16.
double gflops(const Product& p, kernels::GemmBackend backend, double minMs, bool bf16 = false) {
  kernels::setGemmBackend(backend);
  const int64_t rowsA = p.ta ? p.K : p.M, colsA = p.ta ? p.M : p.K;
  const int64_t rowsB = p.tb ? p.N : p.K, colsB = p.tb ? p.K : p.N;
  std::vector<float> A(rowsA * colsA), B(rowsB * colsB), C(p.M * p.N);
  Rng rng(1);
  for (auto& a : A) a = rng.uniform() - 0.5f;
  for (auto& b : B) b = rng.uniform() - 0.5f;
  std::vector<BFloat16> Ah(A.size()), Bh(B.size());
  kernels::toBf16(A.data(), Ah.data(), static_cast<int64_t>(A.size()));
  kernels::toBf16(B.data(), Bh.data(), static_cast<int64_t>(B.size()));
  auto run = [&] {
    if (bf16)
      kernels::gemmBf16(p.ta, p.tb, p.M, p.N, p.K, 1.f, Ah.data(), colsA, Bh.data(), colsB, 0.f,
                        C.data(), p.N);
    else
      kernels::gemm(p.ta, p.tb, p.M, p.N, p.K, 1.f, A.data(), colsA, B.data(), colsB, 0.f,
                    C.data(), p.N);
  };
  run();  // primitive creation, page faults
  std::vector<double> perCall;
  for (int rep = 0; rep < 5; ++rep) {
    int calls = 0;
    const auto t0 = Clock::now();
    double ms = 0;
    do {
      run();
      ++calls;
      ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    } while (ms < minMs / 5);
    perCall.push_back(ms / calls);
  }
  std::sort(perCall.begin(), perCall.end());
  return 2.0 * p.M * p.N * p.K / (perCall[perCall.size() / 2] * 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  double minMs = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--threads") threads = std::atoi(v.c_str());
    else if (a == "--min-ms") minMs = std::atof(v.c_str());
    else {
      std::fprintf(stderr, "gemm_bench: unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  kernels::configureKernels(threads, kernels::GemmBackend::Auto);
  for (const Product& p : kProducts) {
    // Alternate the backends so drifts of a shared machine hit both alike.
    double onednn = 0, openblas = 0, bf16 = 0;
    for (int round = 0; round < 2; ++round) {
      onednn = std::max(onednn, gflops(p, kernels::GemmBackend::OneDnn, minMs / 2));
      openblas = std::max(openblas, gflops(p, kernels::GemmBackend::OpenBlas, minMs / 2));
      bf16 = std::max(bf16, gflops(p, kernels::GemmBackend::Auto, minMs / 2, true));
    }
    kernels::setGemmBackend(kernels::GemmBackend::Auto);
    const bool autoOnednn = kernels::gemmBackendFor(p.M, p.N, p.K) == kernels::GemmBackend::OneDnn;
    std::fprintf(stderr,
                 "%-16s %5lldx%5lldx%5lld  onednn %6.1f  openblas %6.1f  bf16 (%s) %6.1f GFLOP/s  "
                 "auto: %s\n",
                 p.name, static_cast<long long>(p.M), static_cast<long long>(p.N),
                 static_cast<long long>(p.K), onednn, openblas,
                 kernels::nativeBf16Gemm() ? "oneDNN" : "widened", bf16,
                 autoOnednn ? "onednn" : "openblas");
    std::printf("{\"product\": \"%s\", \"M\": %lld, \"N\": %lld, \"K\": %lld, \"threads\": %d, "
                "\"onednn_gflops\": %.1f, \"openblas_gflops\": %.1f, \"bf16_gflops\": %.1f, "
                "\"auto\": \"%s\"}\n",
                p.name, static_cast<long long>(p.M), static_cast<long long>(p.N),
                static_cast<long long>(p.K), threads, onednn, openblas, bf16,
                autoOnednn ? "onednn" : "openblas");
  }
  return 0;
}
