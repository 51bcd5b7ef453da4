// conv2d, maxPool2d, avgPool2d over NCHW.
#include "autograd/Ops.h"
#include "autograd/Precision.h"
#include "autograd/ops/OpUtil.h"
#include "tensor/cpu/ConvDispatch.h"
#include "tensor/cpu/Pool.h"

namespace dtrain::autograd {
namespace {

using detail::writeGrad;

// x and w are kept as the forward convolved them: the fp32 tensors, or under
// bf16 (Precision.h) bf16 copies, and then gy is rounded to bf16 for the
// backward products too, as linear layers do. Gradients land in fp32. Where
// the layer's bf16 passes run packed (ConvDispatch.h), x is kept packed and gy
// packed once for both backward passes.
class Conv2dNode final : public Node {
 public:
  Conv2dNode(kernels::ConvShape s, Tensor x, Tensor w, bool hasBias, kernels::ConvPacking packing,
             kernels::ConvLayout layout)
      : s_(s),
        x_(std::move(x)),
        w_(std::move(w)),
        hasBias_(hasBias),
        packing_(packing),
        layout_(layout) {}
  const char* name() const override { return "conv2d"; }
  // Blocked activations: gy comes and gx goes in their layouts.
  bool gradientsInInputFormat() const override { return layout_.x || layout_.y; }
  void backward(const Tensor& gy, GradSink& sink) override {
    const bool nx = sink.needs(0), nw = sink.needs(1), nb = hasBias_ && sink.needs(2);
    // The kernel overwrites its outputs; accumulate through temporaries where needed.
    Tensor tx, tw, tb;
    float *gx = nullptr, *gw = nullptr, *gb = nullptr;
    GradTarget Tx, Tw, Tb;
    auto pick = [&](bool need, size_t i, int64_t n, Tensor& tmp, GradTarget& T, float*& out) {
      if (!need) return;
      T = sink.target(i);
      if (T.accumulate) {
        tmp = Tensor::empty({n});
        out = tmp.data<float>();
      } else {
        out = T.ptr;
      }
    };
    pick(nx, 0, x_.numel(), tx, Tx, gx);
    pick(nw, 1, w_.numel(), tw, Tw, gw);
    pick(nb, 2, s_.Cout, tb, Tb, gb);
    if (packing_.packed()) {
      Tensor g = Tensor::empty({packing_.gy}, DType::BF16);
      kernels::packConvOutputGrad(s_, gy.data<float>(), g.data<BFloat16>());
      kernels::convolveBackwardPacked(s_, x_.data<BFloat16>(), w_.data<BFloat16>(),
                                      g.data<BFloat16>(), gx, gw, gb);
    } else if (x_.dtype() == DType::BF16) {
      const Tensor g = detail::toBf16(gy.data<float>(), gy.shape());
      kernels::convolveBackward(s_, x_.data<BFloat16>(), w_.data<BFloat16>(), g.data<BFloat16>(),
                                gx, gw, gb);
    } else {
      kernels::convolveBackward(s_, x_.data<float>(), w_.data<float>(), gy.data<float>(), gx, gw,
                                gb, layout_);
    }
    if (tx.defined()) kernels::add(Tx.ptr, gx, Tx.ptr, x_.numel());
    if (tw.defined()) kernels::add(Tw.ptr, gw, Tw.ptr, w_.numel());
    if (tb.defined()) kernels::add(Tb.ptr, gb, Tb.ptr, s_.Cout);
  }
  void release() override { x_ = w_ = Tensor(); }

 private:
  kernels::ConvShape s_;
  Tensor x_, w_;
  bool hasBias_;
  kernels::ConvPacking packing_;
  kernels::ConvLayout layout_;
};

class MaxPoolNode final : public Node {
 public:
  MaxPoolNode(kernels::PoolShape s, Tensor argmax) : s_(s), argmax_(std::move(argmax)) {}
  const char* name() const override { return "max_pool2d"; }
  void backward(const Tensor& gy, GradSink& sink) override {
    writeGrad(sink, 0, s_.N * s_.C * s_.H * s_.W, [&](float* o) {
      kernels::maxPool2dBackward(s_, gy.data<float>(), argmax_.data<int32_t>(), o);
    });
  }
  void release() override { argmax_ = Tensor(); }

 private:
  kernels::PoolShape s_;
  Tensor argmax_;
};

class AvgPoolNode final : public Node {
 public:
  explicit AvgPoolNode(kernels::PoolShape s) : s_(s) {}
  const char* name() const override { return "avg_pool2d"; }
  void backward(const Tensor& gy, GradSink& sink) override {
    writeGrad(sink, 0, s_.N * s_.C * s_.H * s_.W,
              [&](float* o) { kernels::avgPool2dBackward(s_, gy.data<float>(), o); });
  }

 private:
  kernels::PoolShape s_;
};

// Global average pooling of a channel-blocked input: the plain [N, C, 1, 1]
// means, and their gradient spread back over the blocked pixels.
class BlockedGlobalPoolNode final : public Node {
 public:
  explicit BlockedGlobalPoolNode(Shape x) : x_(std::move(x)) {}
  const char* name() const override { return "global_avg_pool2d"; }
  bool gradientsInInputFormat() const override { return true; }
  void backward(const Tensor& gy, GradSink& sink) override {
    const int64_t N = x_[0], C = x_[1], S = x_[2] * x_[3];
    writeGrad(sink, 0, N * C * S, [&](float* o) {
      kernels::globalAvgPoolBackwardBlocked(gy.data<float>(), o, N, C, S);
    });
  }

 private:
  Shape x_;
};

kernels::PoolShape poolShape(const Tensor& x, int64_t k, int64_t stride, int64_t pad,
                             const char* op) {
  DTRAIN_CHECK(x.dim() == 4, op, ": expected NCHW input, got ", shapeStr(x.shape()));
  DTRAIN_CHECK(k > 0 && stride > 0 && pad >= 0 && 2 * pad <= k, op, ": bad kernel ", k,
               " stride ", stride, " padding ", pad);
  kernels::PoolShape s{x.size(0), x.size(1), x.size(2), x.size(3), k, k, stride, stride, pad, pad};
  DTRAIN_CHECK(s.outH() > 0 && s.outW() > 0, op, ": kernel ", k, " larger than input ",
               shapeStr(x.shape()));
  return s;
}

}  // namespace

Variable conv2d(const Variable& x, const Variable& weight, const Variable& bias, int64_t stride,
                int64_t padding, MemoryFormat output) {
  Tensor xd = detail::denseData(x, "conv2d", "input"),
         wd = detail::contig(weight, "conv2d", "weight");
  DTRAIN_CHECK(xd.dim() == 4 && wd.dim() == 4 && xd.size(1) == wd.size(1), "conv2d: input ",
               shapeStr(xd.shape()), " does not match weight ", shapeStr(wd.shape()));
  DTRAIN_CHECK(stride > 0 && padding >= 0, "conv2d: bad stride ", stride, " or padding ", padding);
  kernels::ConvShape s{xd.size(0), xd.size(1), xd.size(2), xd.size(3), wd.size(0), wd.size(2),
                       wd.size(3), stride, stride, padding, padding};
  DTRAIN_CHECK(s.outH() > 0 && s.outW() > 0, "conv2d: kernel ", shapeStr(wd.shape()),
               " larger than padded input ", shapeStr(xd.shape()));
  Tensor bd;
  if (bias.defined()) {
    bd = detail::contig(bias, "conv2d", "bias");
    DTRAIN_CHECK(bd.numel() == s.Cout, "conv2d: bias of ", bd.numel(), " for ", s.Cout, " channels");
  }
  // Blocked activations are fp32 only: bf16 operands take the plain (or packed) path.
  const bool bf16 = precision() == Precision::BF16;
  if (bf16) xd = xd.contiguous();
  const kernels::ConvLayout layout{
      xd.blocked(), !bf16 && output == MemoryFormat::ChannelBlocked && kernels::convBlockable(s)};
  Tensor y = Tensor::emptyIn({s.N, s.Cout, s.outH(), s.outW()},
                             layout.y ? MemoryFormat::ChannelBlocked : MemoryFormat::Plain);
  const float* b = bd.defined() ? bd.data<float>() : nullptr;
  // The operands as convolved, and kept for backward.
  Tensor xs = xd, ws = wd;
  kernels::ConvPacking packing;
  if (bf16) {
    ws = detail::toBf16(wd.data<float>(), wd.shape());
    packing = kernels::convPacking(s);
    if (packing.packed()) {
      xs = Tensor::empty({packing.x}, DType::BF16);
      kernels::packConvInput(s, xd.data<float>(), xs.data<BFloat16>());
      kernels::convolvePacked(s, xs.data<BFloat16>(), ws.data<BFloat16>(), b, y.data<float>());
    } else {
      xs = detail::toBf16(xd.data<float>(), xd.shape());
      kernels::convolve(s, xs.data<BFloat16>(), ws.data<BFloat16>(), b, y.data<float>());
    }
  } else {
    kernels::convolve(s, xd.data<float>(), wd.data<float>(), b, y.data<float>(), layout);
  }
  if (!needsGraph({&x, &weight, &bias})) return Variable(std::move(y));
  return record(std::move(y),
                std::make_shared<Conv2dNode>(s, std::move(xs), std::move(ws), bias.defined(),
                                             packing, layout),
                {&x, &weight, &bias});
}

Variable maxPool2d(const Variable& x, int64_t kernel, int64_t stride, int64_t padding) {
  Tensor xd = detail::contig(x, "max_pool2d", "input");
  auto s = poolShape(xd, kernel, stride, padding, "max_pool2d");
  Tensor y = Tensor::empty({s.N, s.C, s.outH(), s.outW()});
  Tensor argmax = Tensor::empty(y.shape(), DType::I32);
  kernels::maxPool2dForward(s, xd.data<float>(), y.data<float>(), argmax.data<int32_t>());
  if (!needsGraph({&x})) return Variable(std::move(y));
  return record(std::move(y), std::make_shared<MaxPoolNode>(s, std::move(argmax)), {&x});
}

Variable avgPool2d(const Variable& x, int64_t kernel, int64_t stride, int64_t padding) {
  Tensor xd = detail::contig(x, "avg_pool2d", "input");
  auto s = poolShape(xd, kernel, stride, padding, "avg_pool2d");
  Tensor y = Tensor::empty({s.N, s.C, s.outH(), s.outW()});
  kernels::avgPool2dForward(s, xd.data<float>(), y.data<float>());
  if (!needsGraph({&x})) return Variable(std::move(y));
  return record(std::move(y), std::make_shared<AvgPoolNode>(s), {&x});
}

Variable globalAvgPool2d(const Variable& x) {
  Tensor xd = detail::denseData(x, "global_avg_pool2d", "input");
  DTRAIN_CHECK(xd.dim() == 4, "global_avg_pool2d: expected NCHW input, got ", shapeStr(xd.shape()));
  const int64_t N = xd.size(0), C = xd.size(1), H = xd.size(2), W = xd.size(3);
  if (xd.blocked()) {  // the model's edge: plain means out of blocked activations
    Tensor y = Tensor::empty({N, C, 1, 1});
    kernels::globalAvgPoolBlocked(xd.data<float>(), y.data<float>(), N, C, H * W);
    Variable out =
        needsGraph({&x})
            ? record(std::move(y), std::make_shared<BlockedGlobalPoolNode>(xd.shape()), {&x})
            : Variable(std::move(y));
    return flatten(out, 1);
  }
  kernels::PoolShape s{N, C, H, W, H, W, H, W, 0, 0};
  Tensor y = Tensor::empty({N, C, 1, 1});
  kernels::avgPool2dForward(s, xd.data<float>(), y.data<float>());
  Variable out = needsGraph({&x}) ? record(std::move(y), std::make_shared<AvgPoolNode>(s), {&x})
                                  : Variable(std::move(y));
  return flatten(out, 1);
}

}  // namespace dtrain::autograd
