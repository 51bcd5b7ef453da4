// resnet-20 training steps (forward + backward, batch 128, 1 thread) with the
// activations channel-blocked (the default) and plain NCHW, interleaved step
// by step in one process, so that a busy machine slows both alike. Prints the
// median thread CPU time and wall time of a step per layout, and their ratio.
//   resnet_layout_bench [pairs=10] [batch=128]
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "autograd/Ops.h"
#include "core/ThreadPool.h"
#include "nn/Init.h"
#include "nn/ModelRegistry.h"
#include "nn/ResNet.h"
#include "tensor/cpu/Onednn.h"

using namespace dtrain;

namespace {

double threadSeconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int pairs = argc > 1 ? std::atoi(argv[1]) : 10;
  const int64_t batch = argc > 2 ? std::atoll(argv[2]) : 128;
  setNumThreads(1);
  kernels::onednn::setThreads(1);
  std::shared_ptr<nn::Module> models[2] = {nn::buildModel("resnet-20", {}, 1),
                                           nn::buildModel("resnet-20", {}, 1)};
  std::static_pointer_cast<nn::ResNet>(models[1])->setActivationFormat(MemoryFormat::Plain);
  Rng rng(2);
  Tensor x = Tensor::empty({batch, 1, 28, 28});
  nn::init::normal(x, 0.f, 1.f, rng);
  std::vector<int32_t> labels(batch);
  for (int64_t i = 0; i < batch; ++i) labels[i] = static_cast<int32_t>(i % 10);
  const Tensor y = Tensor::fromInts(labels, {batch});
  std::vector<double> cpu[2], wall[2];
  for (int step = 0; step < pairs + 2; ++step)
    for (int m = 0; m < 2; ++m) {
      for (auto& p : models[m]->parameters()) p.zeroGrad();
      const double c0 = threadSeconds();
      const auto w0 = std::chrono::steady_clock::now();
      autograd::crossEntropy(models[m]->forward(autograd::Variable(x)), y).backward();
      const double c = threadSeconds() - c0;
      const double w = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
      if (step < 2) continue;  // warm-up: primitives created, buffers grown
      cpu[m].push_back(c);
      wall[m].push_back(w);
    }
  const char* names[2] = {"blocked", "plain"};
  for (int m = 0; m < 2; ++m)
    std::printf("%s: cpu %.1f ms/step (%.0f samples/cpu-s), wall %.1f ms/step\n", names[m],
                1e3 * median(cpu[m]), batch / median(cpu[m]), 1e3 * median(wall[m]));
  std::printf("{\"pairs\": %d, \"batch\": %lld, \"blocked_cpu_ms\": %.2f, \"plain_cpu_ms\": %.2f, "
              "\"speedup_cpu\": %.3f, \"speedup_wall\": %.3f}\n",
              pairs, static_cast<long long>(batch), 1e3 * median(cpu[0]), 1e3 * median(cpu[1]),
              median(cpu[1]) / median(cpu[0]), median(wall[1]) / median(wall[0]));
}
