// Milliseconds and GFLOP/s of lenet's convolutions at their training shapes
// (batch 64, and 10 as a FedAvg client's), per pass: dtrain's own kernels
// (Conv.h) vs oneDNN's convolution primitives (OnednnConv.h) in fp32 and bf16
// (bf16 operands, fp32 outputs, reorders to and from oneDNN's layouts
// included), and dtrain's kernels on bf16 operands widened to fp32 (what runs
// under --precision bf16 where dtrain's kernels are chosen). ConvDispatch.h's
// table of which implementation runs where comes from these figures.
// --model resnet-20: resnet-20's distinct convolutions at batch 128 instead
// (nn/ResNet.h; "x6" = how many of the layer one step runs).
//   conv_bench [--threads 1] [--reps 7] [--min-ms 20] [--model lenet|resnet-20]
// One line per layer and pass on stderr; one JSON line each on stdout.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "core/Rng.h"
#include "tensor/cpu/Bf16.h"
#include "tensor/cpu/Blas.h"
#include "tensor/cpu/ConvDispatch.h"
#include "tensor/cpu/OnednnConv.h"

using namespace dtrain;
using namespace dtrain::kernels;
using Clock = std::chrono::steady_clock;

namespace {

struct Layer {
  const char* name;
  ConvShape s;
};

// lenet (src/nn/Models.cpp): conv1 1->6 5x5 padding 2 on 28x28, conv2 6->16 5x5 on 14x14.
const Layer kLayers[] = {
    {"conv1 b64", {64, 1, 28, 28, 6, 5, 5, 1, 1, 2, 2}},
    {"conv2 b64", {64, 6, 14, 14, 16, 5, 5, 1, 1, 0, 0}},
    {"conv1 b10", {10, 1, 28, 28, 6, 5, 5, 1, 1, 2, 2}},
    {"conv2 b10", {10, 6, 14, 14, 16, 5, 5, 1, 1, 0, 0}},
};

// resnet-20 (src/nn/ResNet.cpp) at batch 128: every distinct shape once.
const Layer kResNetLayers[] = {
    {"stem x1", {128, 1, 28, 28, 16, 3, 3, 1, 1, 1, 1}},
    {"l1 x6", {128, 16, 28, 28, 16, 3, 3, 1, 1, 1, 1}},
    {"l2.0.c1 x1", {128, 16, 28, 28, 32, 3, 3, 2, 2, 1, 1}},
    {"l2.0.ds x1", {128, 16, 28, 28, 32, 1, 1, 2, 2, 0, 0}},
    {"l2 x5", {128, 32, 14, 14, 32, 3, 3, 1, 1, 1, 1}},
    {"l3.0.c1 x1", {128, 32, 14, 14, 64, 3, 3, 2, 2, 1, 1}},
    {"l3.0.ds x1", {128, 32, 14, 14, 64, 1, 1, 2, 2, 0, 0}},
    {"l3 x5", {128, 64, 7, 7, 64, 3, 3, 1, 1, 1, 1}},
};

const char* const kPassNames[] = {"forward", "backward-data", "backward-weights"};
const char* const kImplNames[] = {"dtrain fp32", "onednn fp32", "dtrain bf16", "onednn bf16"};

std::vector<float> randomVector(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = rng.uniform() - 0.5f;
  return v;
}

// One implementation of a pass: f runs it once; ms holds milliseconds per
// call, one figure per repetition (calls repeated for --min-ms each).
struct Timer {
  std::function<void()> f;
  std::vector<double> ms;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, reps = 7;
  double minMs = 20;
  std::string model = "lenet";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--threads")
      threads = std::atoi(v.c_str());
    else if (a == "--reps")
      reps = std::atoi(v.c_str());
    else if (a == "--min-ms")
      minMs = std::atof(v.c_str());
    else if (a == "--model" && (v == "lenet" || v == "resnet-20"))
      model = v;
    else {
      std::fprintf(stderr, "conv_bench: unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  configureKernels(threads, GemmBackend::Auto);
  const bool bf16Ok = onednnConvBf16();
  std::vector<Layer> layers(std::begin(kLayers), std::end(kLayers));
  if (model == "resnet-20") layers.assign(std::begin(kResNetLayers), std::end(kResNetLayers));
  for (const Layer& L : layers) {
    const ConvShape& s = L.s;
    const size_t nx = s.N * s.Cin * s.H * s.W, nw = s.Cout * s.Cin * s.KH * s.KW,
                 ny = s.N * s.Cout * s.outH() * s.outW();
    const auto x = randomVector(nx, 1), w = randomVector(nw, 2), b = randomVector(s.Cout, 3),
               gy = randomVector(ny, 4);
    std::vector<BFloat16> xh(nx), wh(nw), gyh(ny);
    toBf16(x.data(), xh.data(), nx);
    toBf16(w.data(), wh.data(), nw);
    toBf16(gy.data(), gyh.data(), ny);
    std::vector<float> y(ny), gx(nx), gw(nw), gb(s.Cout), xw(nx), ww(nw), gyw(ny);
    // dtrain's kernels on bf16 operands: widen, then the fp32 kernels.
    auto widen = [&](bool xs, bool ws, bool gys) {
      if (xs) fromBf16(xh.data(), xw.data(), nx);
      if (ws) fromBf16(wh.data(), ww.data(), nw);
      if (gys) fromBf16(gyh.data(), gyw.data(), ny);
    };
    const double gflop = 2.0 * ny * s.Cin * s.KH * s.KW / 1e9;
    for (int pass = 0; pass < 3; ++pass) {
      std::vector<Timer> t(4);
      if (pass == 0) {
        t[0].f = [&] { conv2dForward(s, x.data(), w.data(), b.data(), y.data()); };
        t[1].f = [&] { onednn::convForward(s, false, x.data(), w.data(), b.data(), y.data()); };
        t[2].f = [&] {
          widen(true, true, false);
          conv2dForward(s, xw.data(), ww.data(), b.data(), y.data());
        };
        t[3].f = [&] { onednn::convForward(s, true, xh.data(), wh.data(), b.data(), y.data()); };
      } else if (pass == 1) {
        t[0].f = [&] {
          conv2dBackward(s, x.data(), w.data(), gy.data(), gx.data(), nullptr, nullptr);
        };
        t[1].f = [&] { onednn::convBackwardData(s, false, gy.data(), w.data(), gx.data()); };
        t[2].f = [&] {
          widen(false, true, true);
          conv2dBackward(s, xw.data(), ww.data(), gyw.data(), gx.data(), nullptr, nullptr);
        };
        t[3].f = [&] { onednn::convBackwardData(s, true, gyh.data(), wh.data(), gx.data()); };
      } else {
        t[0].f = [&] {
          conv2dBackward(s, x.data(), w.data(), gy.data(), nullptr, gw.data(), gb.data());
        };
        t[1].f = [&] {
          onednn::convBackwardWeights(s, false, x.data(), gy.data(), gw.data(), gb.data());
        };
        t[2].f = [&] {
          widen(true, false, true);
          conv2dBackward(s, xw.data(), ww.data(), gyw.data(), nullptr, gw.data(), gb.data());
        };
        t[3].f = [&] {
          onednn::convBackwardWeights(s, true, xh.data(), gyh.data(), gw.data(), gb.data());
        };
      }
      if (!bf16Ok) t.pop_back();
      for (Timer& tm : t) tm.f();  // primitive creation, scratch growth, page faults
      // Alternate the implementations so drifts of a shared machine hit all alike.
      for (int rep = 0; rep < reps; ++rep)
        for (Timer& tm : t) {
          int calls = 0;
          const auto t0 = Clock::now();
          double ms = 0;
          do {
            tm.f();
            ++calls;
            ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
          } while (ms < minMs);
          tm.ms.push_back(ms / calls);
        }
      const auto dir = static_cast<ConvPass>(pass);
      const bool fp32OneDnn = convImplFor(s, dir, false) == ConvImpl::OneDnn;
      const bool bf16OneDnn = convImplFor(s, dir, true) == ConvImpl::OneDnn;
      std::fprintf(stderr, "%-11s %-16s", L.name, kPassNames[pass]);
      std::printf("{\"layer\": \"%s\", \"pass\": \"%s\", \"threads\": %d", L.name, kPassNames[pass],
                  threads);
      for (size_t i = 0; i < t.size(); ++i) {
        const double ms = median(t[i].ms);
        std::fprintf(stderr, "  %s %7.4f ms %6.1f", kImplNames[i], ms, gflop / ms * 1e3);
        std::printf(", \"%s ms\": %.4f, \"%s gflops\": %.1f", kImplNames[i], ms, kImplNames[i],
                    gflop / ms * 1e3);
      }
      std::fprintf(stderr, "  GFLOP/s  runs: fp32 %s, bf16 %s\n", fp32OneDnn ? "onednn" : "dtrain",
                   bf16OneDnn ? "onednn" : "dtrain");
      std::printf(", \"fp32 runs\": \"%s\", \"bf16 runs\": \"%s\"}\n",
                  fp32OneDnn ? "onednn" : "dtrain", bf16OneDnn ? "onednn" : "dtrain");
    }
  }
  return 0;
}
