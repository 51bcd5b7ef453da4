// Times one training step of a GPT preset: forward + backward (and the Adam
// update separately) on a fixed random byte batch, one thread by default.
//   gpt_step_bench [--size gpt-small] [--batch 16] [--steps 20] [--threads 1] [--gemm auto]
//                  [--precision fp32] [--recompute none|blocks|all]
// Prints per-phase medians and one JSON line (ms per fwd+bwd step, tokens/s, and
// the allocator's peak during the timed steps: parameters, gradients, optimizer
// state and the activations a step keeps for backward; activations_mib: what
// forward left allocated for backward, which --recompute cuts).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "autograd/Precision.h"
#include "core/Memory.h"
#include "nn/Gpt.h"
#include "nn/RecomputeModes.h"
#include "optim/Factory.h"
#include "tensor/cpu/Blas.h"

using namespace dtrain;
using Clock = std::chrono::steady_clock;

namespace {

double ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string size = "gpt-small";
  int64_t batch = 16, steps = 20, threads = 1;
  std::string gemm = "auto", precision = "fp32", recompute = "none";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--size") size = v;
    else if (a == "--batch") batch = std::atoll(v.c_str());
    else if (a == "--steps") steps = std::atoll(v.c_str());
    else if (a == "--threads") threads = std::atoll(v.c_str());
    else if (a == "--gemm") gemm = v;
    else if (a == "--precision") precision = v;
    else if (a == "--recompute") recompute = v;
    else {
      std::fprintf(stderr, "unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  kernels::configureKernels(static_cast<int>(threads), kernels::parseGemmBackend(gemm));
  autograd::setPrecision(autograd::parsePrecision(precision));
  const nn::GptConfig cfg = nn::gptConfig(size);
  auto model = nn::makeGpt(cfg, 1337);
  nn::applyRecompute(*model, recompute);
  auto opt = optim::makeOptimizer("adamw", model->namedParameters(), {.lr = 1e-3});
  const int64_t T = cfg.blockSize;
  Tensor x = Tensor::empty({batch, T}, DType::I32), y = Tensor::empty({batch, T}, DType::I32);
  Rng rng(1);
  for (int64_t i = 0; i < batch * T; ++i) {
    x.data<int32_t>()[i] = static_cast<int32_t>(rng.below(256));
    y.data<int32_t>()[i] = static_cast<int32_t>(rng.below(256));
  }
  std::vector<double> fwd, bwd, upd;
  int64_t peakBytes = 0, keptBytes = 0;
  float loss = 0;
  for (int64_t s = 0; s < steps + 3; ++s) {  // 3 warm-up steps, untimed
    opt->zeroGrad();
    const int64_t beforeForward = memory::stats().currentBytes;
    auto t0 = Clock::now();
    autograd::Variable l = model->loss(x, y);
    auto t1 = Clock::now();
    keptBytes = memory::stats().currentBytes - beforeForward;
    l.backward();
    auto t2 = Clock::now();
    opt->step();
    auto t3 = Clock::now();
    loss = l.item();
    if (s < 3) {
      memory::resetPeak();
      continue;
    }
    peakBytes = memory::stats().peakBytes;
    fwd.push_back(ms(t0, t1));
    bwd.push_back(ms(t1, t2));
    upd.push_back(ms(t2, t3));
  }
  std::vector<double> fb(fwd.size());
  for (size_t i = 0; i < fb.size(); ++i) fb[i] = fwd[i] + bwd[i];
  const double step = median(fb);
  std::fprintf(stderr, "%s batch %lld x %lld, %lld threads: forward %.1f ms, backward %.1f ms, adamw %.2f ms, loss %.4f\n",
               size.c_str(), static_cast<long long>(batch), static_cast<long long>(T),
               static_cast<long long>(threads), median(fwd), median(bwd), median(upd), loss);
  std::printf("{\"size\": \"%s\", \"gemm\": \"%s\", \"precision\": \"%s\", \"batch\": %lld, "
              "\"block\": %lld, \"threads\": %lld, \"ms_fwd_bwd\": %.2f, \"ms_adamw\": %.2f, "
              "\"tokens_per_s_fwd_bwd\": %.0f, \"peak_mib\": %.1f, \"recompute\": \"%s\", "
              "\"activations_mib\": %.1f}\n",
              size.c_str(), gemm.c_str(), precision.c_str(), static_cast<long long>(batch),
              static_cast<long long>(T), static_cast<long long>(threads), step, median(upd),
              batch * T / step * 1e3, peakBytes / 1048576.0, recompute.c_str(),
              keptBytes / 1048576.0);
  return 0;
}
