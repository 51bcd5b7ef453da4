// batchNorm2d and layerNorm.
#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/Ops.h"
#include "autograd/Precision.h"
#include "autograd/ops/OpUtil.h"
#include "tensor/cpu/Bf16.h"
#include "tensor/cpu/Blocked.h"
#include "tensor/cpu/Norm.h"

namespace dtrain::autograd {
namespace {

// Gradients of (x, gamma, beta) from one kernel that overwrites all three.
template <typename Kernel>
void normBackward(GradSink& sink, const Shape& xShape, int64_t nc, bool affine, Kernel&& kernel) {
  Tensor gx = Tensor::empty(xShape), gg, gb;
  if (affine) {
    gg = Tensor::empty({nc});
    gb = Tensor::empty({nc});
  }
  kernel(gx.data<float>(), affine ? gg.data<float>() : nullptr, affine ? gb.data<float>() : nullptr);
  if (sink.needs(0)) sink.add(0, std::move(gx));
  if (affine && sink.needs(1)) detail::writeScaled(sink, 1, 1.f, gg.data<float>(), nc);
  if (affine && sink.needs(2)) detail::writeScaled(sink, 2, 1.f, gb.data<float>(), nc);
}

// What every normalization backward needs: the input, the scale (undefined
// without affine), and the per-group mean and 1/std the forward used.
class SavedNormNode : public Node {
 public:
  SavedNormNode(Tensor x, Tensor gamma, Tensor mean, Tensor invStd)
      : x_(std::move(x)), gamma_(std::move(gamma)), mean_(std::move(mean)), invStd_(std::move(invStd)) {}
  void release() override { x_ = gamma_ = mean_ = invStd_ = Tensor(); }

 protected:
  Tensor x_, gamma_, mean_, invStd_;
};

// BatchNorm (+ residual + ReLU), training or eval: one node. Saves x, gamma,
// the mean and 1/std used (batch or running), and with ReLU the output (its
// mask). Gradients as torch's (SyncBN's too: the weight and bias gradients are
// this rank's sums, the input's uses the sums over the ranks).
class BatchNormNode final : public SavedNormNode {
 public:
  BatchNormNode(Tensor x, Tensor gamma, Tensor mean, Tensor invStd, Tensor y, bool training,
                bool residual, MemoryFormat residualFormat, double count, SumAcrossRanks sync)
      : SavedNormNode(std::move(x), std::move(gamma), std::move(mean), std::move(invStd)),
        y_(std::move(y)), training_(training), residual_(residual),
        residualFormat_(residualFormat), count_(count),
        sync_(std::move(sync)) {}
  const char* name() const override { return "batch_norm2d"; }
  bool gradientsInInputFormat() const override { return true; }
  void release() override {
    SavedNormNode::release();
    y_ = Tensor();
  }
  void backward(const Tensor& gy, GradSink& sink) override {
    const int64_t N = x_.size(0), C = x_.size(1), S = x_.numel() / std::max<int64_t>(1, N * C);
    const int64_t numel = x_.numel();
    const bool relu = y_.defined(), blocked = x_.blocked();
    // gy, x, y and the masked gradient share x's format; the residual's
    // gradient is written in it directly where the residual came in it too.
    const bool residualDirect = residualFormat_ == x_.format();
    // With ReLU the masked gradient is the residual's gradient too: written
    // straight into it when it holds none yet.
    Tensor masked;
    float* maskOut = nullptr;
    bool residualDone = false;
    if (relu) {
      if (residual_ && residualDirect && sink.needs(3)) {
        GradTarget t = sink.target(3);
        if (!t.accumulate) maskOut = t.ptr, residualDone = true;
      }
      if (!residualDone) {
        masked = Tensor::emptyIn(x_.shape(), x_.format());
        maskOut = masked.data<float>();
      }
    }
    const float* g = relu ? maskOut : gy.data<float>();
    std::vector<double> sums(2 * C);
    (blocked ? kernels::batchNormBackwardSumsBlocked : kernels::batchNormBackwardSums)(
        x_.data<float>(), relu ? y_.data<float>() : nullptr, gy.data<float>(), mean_.data<float>(),
        maskOut, sums.data(), sums.data() + C, N, C, S);
    if (residual_ && sink.needs(3) && !residualDone) {
      if (residualDirect)
        detail::writeScaled(sink, 3, 1.f, g, numel);
      else
        sink.add(3, (relu ? masked : gy).toFormat(residualFormat_));
    }
    const bool affine = gamma_.defined();
    const float* is = invStd_.data<float>();
    if (affine && sink.needs(1)) {
      std::vector<float> gg(C);
      for (int64_t c = 0; c < C; ++c) gg[c] = static_cast<float>(sums[C + c] * is[c]);
      detail::writeScaled(sink, 1, 1.f, gg.data(), C);
    }
    if (affine && sink.needs(2)) {
      std::vector<float> gb(C);
      for (int64_t c = 0; c < C; ++c) gb[c] = static_cast<float>(sums[c]);
      detail::writeScaled(sink, 2, 1.f, gb.data(), C);
    }
    if (!sink.needs(0)) return;
    std::vector<float> k(C), meanG(C, 0.f), q(C, 0.f);
    if (training_ && sync_) {  // SyncBN: the sums over every replica's batch
      std::vector<float> both(sums.begin(), sums.end());
      sync_(both.data(), 2 * C);
      for (int64_t i = 0; i < 2 * C; ++i) sums[i] = both[i];
    }
    for (int64_t c = 0; c < C; ++c) {
      k[c] = is[c] * (affine ? gamma_.data<float>()[c] : 1.f);
      if (training_) {
        meanG[c] = static_cast<float>(sums[c] / count_);
        q[c] = static_cast<float>(sums[C + c] / count_ * is[c] * is[c]);
      }
    }
    detail::writeGrad(sink, 0, numel, [&](float* out) {
      (blocked ? kernels::batchNormBackwardApplyBlocked : kernels::batchNormBackwardApply)(
          x_.data<float>(), g, mean_.data<float>(), k.data(), meanG.data(), q.data(), out, N, C, S);
    });
  }

 private:
  Tensor y_;
  bool training_, residual_;
  MemoryFormat residualFormat_;
  double count_;  // values per channel the statistics came from (all replicas' under SyncBN)
  SumAcrossRanks sync_;
};

// Under bf16 (Precision.h) x_ is a bf16 copy of the input (the residual stream
// in a transformer: half its bytes), widened again for the backward.
class LayerNormNode final : public SavedNormNode {
 public:
  using SavedNormNode::SavedNormNode;
  const char* name() const override { return "layer_norm"; }
  void backward(const Tensor& gy, GradSink& sink) override {
    const int64_t D = x_.size(-1), R = x_.numel() / std::max<int64_t>(1, D);
    const bool affine = gamma_.defined();
    Tensor x = x_;
    if (x_.dtype() == DType::BF16) {
      x = Tensor::empty(x_.shape());
      kernels::fromBf16(x_.data<BFloat16>(), x.data<float>(), x.numel());
    }
    normBackward(sink, x_.shape(), D, affine, [&](float* gx, float* gg, float* gb) {
      kernels::layerNormBackward(x.data<float>(), affine ? gamma_.data<float>() : nullptr,
                                 mean_.data<float>(), invStd_.data<float>(), gy.data<float>(), gx,
                                 gg, gb, R, D);
    });
  }
};

}  // namespace

Variable batchNorm2d(const Variable& x, const Variable& gamma, const Variable& beta,
                     Tensor& runMean, Tensor& runVar, bool training, float momentum, float eps) {
  BatchNormSpec spec;
  spec.runMean = &runMean;
  spec.runVar = &runVar;
  spec.training = training;
  spec.momentum = momentum;
  spec.eps = eps;
  return batchNorm2dAct(x, gamma, beta, Variable(), spec);
}

Variable batchNorm2dAct(const Variable& x, const Variable& gamma, const Variable& beta,
                        const Variable& residual, const BatchNormSpec& spec) {
  // A channel-blocked input stays blocked: the output and the gradients too.
  Tensor xd = detail::denseData(x, "batch_norm2d", "input");
  DTRAIN_CHECK(xd.dim() == 4, "batch_norm2d: expected NCHW input, got ", shapeStr(xd.shape()));
  DTRAIN_CHECK(spec.runMean && spec.runVar, "batch_norm2d: no running statistics");
  const int64_t N = xd.size(0), C = xd.size(1), S = xd.size(2) * xd.size(3);
  Tensor g = gamma.defined() ? detail::contig(gamma, "batch_norm2d", "weight") : Tensor();
  Tensor b = beta.defined() ? detail::contig(beta, "batch_norm2d", "bias") : Tensor();
  DTRAIN_CHECK(!g.defined() || g.numel() == C, "batch_norm2d: weight of ", g.numel(), " for ", C,
               " channels");
  DTRAIN_CHECK(!b.defined() || b.numel() == C, "batch_norm2d: bias of ", b.numel(), " for ", C,
               " channels");
  Tensor r;
  if (residual.defined()) {
    r = detail::denseData(residual, "batch_norm2d", "residual").toFormat(xd.format());
    DTRAIN_CHECK(r.shape() == xd.shape(), "batch_norm2d: residual ", shapeStr(r.shape()),
                 " for input ", shapeStr(xd.shape()));
  }
  float* rm = spec.runMean->data<float>();
  float* rv = spec.runVar->data<float>();
  Tensor mean = Tensor::empty({C}), invStd = Tensor::empty({C});
  float* m = mean.data<float>();
  float* is = invStd.data<float>();
  double count = static_cast<double>(N * S);
  const bool blocked = xd.blocked();
  if (spec.training) {
    // Sums around a pivot near the mean: a value of the channel, or under
    // SyncBN the running mean (the same on every replica).
    std::vector<float> pivot(C);
    // The channel's first value: at c * S plain, at lane c % 16 of its block's first pixel blocked.
    const auto first = [&](int64_t c) {
      return blocked ? c / kernels::kChannelBlock * kernels::kChannelBlock * S +
                           c % kernels::kChannelBlock
                     : c * S;
    };
    for (int64_t c = 0; c < C; ++c) pivot[c] = spec.sync ? rm[c] : xd.data<float>()[first(c)];
    std::vector<double> sums(2 * C);
    (blocked ? kernels::batchNormSumsBlocked : kernels::batchNormSums)(
        xd.data<float>(), pivot.data(), sums.data(), sums.data() + C, N, C, S);
    if (spec.sync) {  // one allreduce of [sum | squared sum | count]
      std::vector<float> all(2 * C + 1);
      for (int64_t i = 0; i < 2 * C; ++i) all[i] = static_cast<float>(sums[i]);
      all[2 * C] = static_cast<float>(count);
      spec.sync(all.data(), 2 * C + 1);
      for (int64_t i = 0; i < 2 * C; ++i) sums[i] = all[i];
      count = all[2 * C];
    }
    DTRAIN_CHECK(count > 1, "batch_norm2d: training needs more than one value per channel, got ",
                 shapeStr(xd.shape()));
    const float unbias = static_cast<float>(count / (count - 1));
    for (int64_t c = 0; c < C; ++c) {
      const double d = sums[c] / count;
      const double var = std::max(0.0, sums[C + c] / count - d * d);  // biased: normalizes
      m[c] = static_cast<float>(pivot[c] + d);
      is[c] = static_cast<float>(1.0 / std::sqrt(var + spec.eps));
      if (spec.updateRunning) {  // unbiased into the running estimate, as torch
        rm[c] = (1 - spec.momentum) * rm[c] + spec.momentum * m[c];
        rv[c] = (1 - spec.momentum) * rv[c] + spec.momentum * static_cast<float>(var) * unbias;
      }
    }
  } else {
    for (int64_t c = 0; c < C; ++c) {
      m[c] = rm[c];
      is[c] = 1.f / std::sqrt(rv[c] + spec.eps);
    }
  }
  std::vector<float> scale(C), shift(C);
  for (int64_t c = 0; c < C; ++c) {
    scale[c] = is[c] * (g.defined() ? g.data<float>()[c] : 1.f);
    shift[c] = (b.defined() ? b.data<float>()[c] : 0.f) - m[c] * scale[c];
  }
  Tensor y = Tensor::emptyIn(xd.shape(), xd.format());
  (blocked ? kernels::batchNormApplyBlocked : kernels::batchNormApply)(
      xd.data<float>(), scale.data(), shift.data(), r.defined() ? r.data<float>() : nullptr,
      spec.relu, y.data<float>(), N, C, S);
  if (!needsGraph({&x, &gamma, &beta, &residual})) return Variable(std::move(y));
  auto node = std::make_shared<BatchNormNode>(
      xd, g, mean, invStd, spec.relu ? y : Tensor(), spec.training, residual.defined(),
      residual.defined() ? residual.data().format() : MemoryFormat::Plain, count,
      spec.training ? spec.sync : SumAcrossRanks());
  return record(std::move(y), std::move(node), {&x, &gamma, &beta, &residual});
}

Variable layerNorm(const Variable& x, const Variable& gamma, const Variable& beta, float eps) {
  Tensor xd = detail::contig(x, "layer_norm", "input");
  const int64_t D = xd.size(-1), R = xd.numel() / std::max<int64_t>(1, D);
  Tensor g = gamma.defined() ? detail::contig(gamma, "layer_norm", "weight") : Tensor();
  Tensor b = beta.defined() ? detail::contig(beta, "layer_norm", "bias") : Tensor();
  DTRAIN_CHECK(!g.defined() || g.numel() == D, "layer_norm: weight of ", g.numel(),
               " for normalized size ", D);
  Tensor y = Tensor::empty(xd.shape()), mean = Tensor::empty({R}), invStd = Tensor::empty({R});
  kernels::layerNormForward(xd.data<float>(), g.defined() ? g.data<float>() : nullptr,
                            b.defined() ? b.data<float>() : nullptr, y.data<float>(),
                            mean.data<float>(), invStd.data<float>(), R, D, eps);
  if (!needsGraph({&x, &gamma, &beta})) return Variable(std::move(y));
  const Tensor saved =
      precision() == Precision::BF16 ? detail::toBf16(xd.data<float>(), xd.shape()) : xd;
  return record(std::move(y), std::make_shared<LayerNormNode>(saved, g, mean, invStd),
                {&x, &gamma, &beta});
}

}  // namespace dtrain::autograd
