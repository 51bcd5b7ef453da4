// batchNorm2d and layerNorm.
#include <cmath>

#include "autograd/Ops.h"
#include "autograd/Precision.h"
#include "autograd/ops/OpUtil.h"
#include "tensor/cpu/Bf16.h"
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

class BatchNormNode final : public SavedNormNode {
 public:
  using SavedNormNode::SavedNormNode;
  const char* name() const override { return "batch_norm2d"; }
  void backward(const Tensor& gy, GradSink& sink) override {
    const int64_t N = x_.size(0), C = x_.size(1), S = x_.numel() / std::max<int64_t>(1, N * C);
    const bool affine = gamma_.defined();
    normBackward(sink, x_.shape(), C, affine, [&](float* gx, float* gg, float* gb) {
      kernels::batchNormBackward(x_.data<float>(), affine ? gamma_.data<float>() : nullptr,
                                 mean_.data<float>(), invStd_.data<float>(), gy.data<float>(), gx,
                                 gg, gb, N, C, S);
    });
  }
};

// Eval mode is an affine map per channel: y = (x - mean_run) * invStd_run * gamma + beta.
class BatchNormEvalNode final : public SavedNormNode {
 public:
  using SavedNormNode::SavedNormNode;
  const char* name() const override { return "batch_norm2d_eval"; }
  void backward(const Tensor& gy, GradSink& sink) override {
    const int64_t N = x_.size(0), C = x_.size(1), S = x_.numel() / std::max<int64_t>(1, N * C);
    const bool affine = gamma_.defined();
    normBackward(sink, x_.shape(), C, affine, [&](float* gx, float* gg, float* gb) {
      const float *x = x_.data<float>(), *g = gy.data<float>(), *m = mean_.data<float>(),
                  *is = invStd_.data<float>();
      if (affine) std::fill(gg, gg + C, 0.f), std::fill(gb, gb + C, 0.f);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 0; c < C; ++c) {
          const float k = is[c] * (affine ? gamma_.data<float>()[c] : 1.f);
          for (int64_t i = (n * C + c) * S, e = i + S; i < e; ++i) {
            gx[i] = g[i] * k;
            if (affine) gg[c] += g[i] * (x[i] - m[c]) * is[c], gb[c] += g[i];
          }
        }
    });
  }
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
  Tensor xd = detail::contig(x, "batch_norm2d", "input");
  DTRAIN_CHECK(xd.dim() == 4, "batch_norm2d: expected NCHW input, got ", shapeStr(xd.shape()));
  const int64_t N = xd.size(0), C = xd.size(1), S = xd.size(2) * xd.size(3);
  Tensor g = gamma.defined() ? detail::contig(gamma, "batch_norm2d", "weight") : Tensor();
  Tensor b = beta.defined() ? detail::contig(beta, "batch_norm2d", "bias") : Tensor();
  DTRAIN_CHECK(!g.defined() || g.numel() == C, "batch_norm2d: weight of ", g.numel(), " for ", C,
               " channels");
  Tensor y = Tensor::empty(xd.shape());
  const float* gp = g.defined() ? g.data<float>() : nullptr;
  const float* bp = b.defined() ? b.data<float>() : nullptr;
  if (!training) {
    kernels::batchNormForwardEval(xd.data<float>(), gp, bp, runMean.data<float>(),
                                  runVar.data<float>(), y.data<float>(), N, C, S, eps);
    if (!needsGraph({&x, &gamma, &beta})) return Variable(std::move(y));
    Tensor invStd = Tensor::empty({C});
    for (int64_t c = 0; c < C; ++c)
      invStd.data<float>()[c] = 1.f / std::sqrt(runVar.data<float>()[c] + eps);
    return record(std::move(y), std::make_shared<BatchNormEvalNode>(xd, g, runMean.clone(), invStd),
                  {&x, &gamma, &beta});
  }
  DTRAIN_CHECK(N * S > 1, "batch_norm2d: training needs more than one value per channel, got ",
               shapeStr(xd.shape()));
  Tensor mean = Tensor::empty({C}), invStd = Tensor::empty({C});
  kernels::batchNormForwardTrain(xd.data<float>(), gp, bp, y.data<float>(), mean.data<float>(),
                                 invStd.data<float>(), N, C, S, eps);
  {
    float* rm = runMean.data<float>();
    float* rv = runVar.data<float>();
    const float* m = mean.data<float>();
    const float* is = invStd.data<float>();
    const float unbias = static_cast<float>(N * S) / static_cast<float>(N * S - 1);
    for (int64_t c = 0; c < C; ++c) {
      float var = 1.f / (is[c] * is[c]) - eps;
      rm[c] = (1 - momentum) * rm[c] + momentum * m[c];
      rv[c] = (1 - momentum) * rv[c] + momentum * var * unbias;
    }
  }
  if (!needsGraph({&x, &gamma, &beta})) return Variable(std::move(y));
  return record(std::move(y), std::make_shared<BatchNormNode>(xd, g, mean, invStd),
                {&x, &gamma, &beta});
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
