// linear and matmul: GEMM forward and backward, gradients written straight into
// their targets (beta = 1 when accumulating), so no temporaries.
#include "autograd/Ops.h"
#include "autograd/Precision.h"
#include "autograd/ops/OpUtil.h"
#include "tensor/cpu/Bf16.h"
#include "tensor/cpu/Blas.h"

namespace dtrain::autograd {
namespace {

class LinearNode final : public Node {
 public:
  LinearNode(Tensor x, Tensor w, bool hasBias) : x_(std::move(x)), w_(std::move(w)), hasBias_(hasBias) {}
  const char* name() const override { return "linear"; }
  void backward(const Tensor& gy, GradSink& sink) override {
    const int64_t B = x_.size(0), in = x_.size(1), out = w_.size(0);
    const float* g = gy.data<float>();
    if (sink.needs(0)) {  // dx = gy W
      GradTarget t = sink.target(0);
      kernels::gemm(false, false, B, in, out, 1.f, g, out, w_.data<float>(), in,
                    t.accumulate ? 1.f : 0.f, t.ptr, in);
    }
    if (sink.needs(1)) {  // dW = gy^T x
      GradTarget t = sink.target(1);
      kernels::gemm(true, false, out, in, B, 1.f, g, out, x_.data<float>(), in,
                    t.accumulate ? 1.f : 0.f, t.ptr, in);
    }
    if (hasBias_ && sink.needs(2)) {
      GradTarget t = sink.target(2);
      kernels::sumRows(g, t.ptr, B, out, t.accumulate);
    }
  }
  void release() override { x_ = w_ = Tensor(); }

 private:
  Tensor x_, w_;
  bool hasBias_;
};

Tensor toBf16(const float* x, const Shape& shape) {
  Tensor out = Tensor::empty(shape, DType::BF16);
  kernels::toBf16(x, out.data<BFloat16>(), out.numel());
  return out;
}

// Under bf16 (Precision.h): the products take bf16 copies of x and W, kept for
// backward (half the bytes of fp32 copies); gy is rounded to bf16 for the
// products too, as on bf16 hardware. Gradients land in fp32.
class Bf16LinearNode final : public Node {
 public:
  Bf16LinearNode(Tensor xb, Tensor wb, bool hasBias)
      : xb_(std::move(xb)), wb_(std::move(wb)), hasBias_(hasBias) {}
  const char* name() const override { return "linear_bf16"; }
  void backward(const Tensor& gy, GradSink& sink) override {
    const int64_t B = xb_.size(0), in = xb_.size(1), out = wb_.size(0);
    const float* g = gy.data<float>();
    if (sink.needs(0) || sink.needs(1)) {
      const Tensor gb = toBf16(g, {B, out});
      const BFloat16* gbp = gb.data<BFloat16>();
      if (sink.needs(0)) {  // dx = gy W
        GradTarget t = sink.target(0);
        kernels::gemmBf16(false, false, B, in, out, 1.f, gbp, out, wb_.data<BFloat16>(), in,
                          t.accumulate ? 1.f : 0.f, t.ptr, in);
      }
      if (sink.needs(1)) {  // dW = gy^T x
        GradTarget t = sink.target(1);
        kernels::gemmBf16(true, false, out, in, B, 1.f, gbp, out, xb_.data<BFloat16>(), in,
                          t.accumulate ? 1.f : 0.f, t.ptr, in);
      }
    }
    if (hasBias_ && sink.needs(2)) {
      GradTarget t = sink.target(2);
      kernels::sumRows(g, t.ptr, B, out, t.accumulate);
    }
  }
  void release() override { xb_ = wb_ = Tensor(); }

 private:
  Tensor xb_, wb_;
  bool hasBias_;
};

class MatmulNode final : public Node {
 public:
  MatmulNode(Tensor a, Tensor b) : a_(std::move(a)), b_(std::move(b)) {}
  const char* name() const override { return "matmul"; }
  void backward(const Tensor& gy, GradSink& sink) override {
    const int64_t M = a_.size(0), K = a_.size(1), N = b_.size(1);
    if (sink.needs(0)) {  // da = gy b^T
      GradTarget t = sink.target(0);
      kernels::gemm(false, true, M, K, N, 1.f, gy.data<float>(), N, b_.data<float>(), N,
                    t.accumulate ? 1.f : 0.f, t.ptr, K);
    }
    if (sink.needs(1)) {  // db = a^T gy
      GradTarget t = sink.target(1);
      kernels::gemm(true, false, K, N, M, 1.f, a_.data<float>(), K, gy.data<float>(), N,
                    t.accumulate ? 1.f : 0.f, t.ptr, N);
    }
  }
  void release() override { a_ = b_ = Tensor(); }

 private:
  Tensor a_, b_;
};

}  // namespace

Variable linear(const Variable& x, const Variable& weight, const Variable& bias) {
  Tensor xd = detail::contig(x, "linear", "input");
  Tensor wd = detail::contig(weight, "linear", "weight");
  DTRAIN_CHECK(xd.dim() >= 2 && wd.dim() == 2 && xd.size(-1) == wd.size(1), "linear: input ",
               shapeStr(xd.shape()), " does not match weight ", shapeStr(wd.shape()));
  // Leading dimensions are rows of one GEMM ([B, T, in] is [B*T, in]).
  const int64_t in = wd.size(1), out = wd.size(0), B = xd.numel() / in;
  Shape yShape = xd.shape();
  yShape.back() = out;
  Tensor y = Tensor::empty(yShape);
  if (bias.defined()) {
    Tensor bd = detail::contig(bias, "linear", "bias");
    DTRAIN_CHECK(bd.numel() == out, "linear: bias of ", bd.numel(), " elements for ", out,
                 " outputs");
    // y starts as the bias rows and the GEMM adds to it (beta = 1): one pass
    // over y fewer than adding the bias afterwards.
    kernels::fillRows(y.data<float>(), bd.data<float>(), B, out);
  }
  const float beta = bias.defined() ? 1.f : 0.f;
  if (precision() == Precision::BF16) {
    Tensor xb = toBf16(xd.data<float>(), {B, in}), wb = toBf16(wd.data<float>(), {out, in});
    kernels::gemmBf16(false, true, B, out, in, 1.f, xb.data<BFloat16>(), in, wb.data<BFloat16>(),
                      in, beta, y.data<float>(), out);
    if (!needsGraph({&x, &weight, &bias})) return Variable(std::move(y));
    return record(std::move(y), std::make_shared<Bf16LinearNode>(std::move(xb), std::move(wb),
                                                                 bias.defined()),
                  {&x, &weight, &bias});
  }
  kernels::gemm(false, true, B, out, in, 1.f, xd.data<float>(), in, wd.data<float>(), in, beta,
                y.data<float>(), out);
  if (!needsGraph({&x, &weight, &bias})) return Variable(std::move(y));
  return record(std::move(y), std::make_shared<LinearNode>(xd.view({B, in}), wd, bias.defined()),
                {&x, &weight, &bias});
}

Variable matmul(const Variable& a, const Variable& b) {
  Tensor ad = detail::contig(a, "matmul", "a"), bd = detail::contig(b, "matmul", "b");
  DTRAIN_CHECK(ad.dim() == 2 && bd.dim() == 2 && ad.size(1) == bd.size(0), "matmul: ",
               shapeStr(ad.shape()), " x ", shapeStr(bd.shape()), " do not match");
  const int64_t M = ad.size(0), K = ad.size(1), N = bd.size(1);
  Tensor y = Tensor::empty({M, N});
  kernels::gemm(false, false, M, N, K, 1.f, ad.data<float>(), K, bd.data<float>(), N, 0.f,
                y.data<float>(), N);
  if (!needsGraph({&a, &b})) return Variable(std::move(y));
  return record(std::move(y), std::make_shared<MatmulNode>(ad, bd), {&a, &b});
}

}  // namespace dtrain::autograd
