// linear and matmul: GEMM forward and backward, gradients written straight into
// their targets (beta = 1 when accumulating), so no temporaries.
#include "autograd/Ops.h"
#include "autograd/Precision.h"
#include "autograd/ops/OpUtil.h"
#include "tensor/cpu/Bf16.h"
#include "tensor/cpu/Blas.h"

namespace dtrain::autograd {
namespace {

// C = op(A) op(B) + beta C for A and B both fp32 or both bf16 (C fp32).
void product(bool transA, bool transB, int64_t M, int64_t N, int64_t K, const Tensor& A,
             int64_t lda, const Tensor& B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (A.dtype() == DType::BF16)
    kernels::gemmBf16(transA, transB, M, N, K, 1.f, A.data<BFloat16>(), lda, B.data<BFloat16>(),
                      ldb, beta, C, ldc);
  else
    kernels::gemm(transA, transB, M, N, K, 1.f, A.data<float>(), lda, B.data<float>(), ldb, beta,
                  C, ldc);
}

// x and W are kept as the forward multiplied them: the fp32 tensors themselves,
// or under bf16 (Precision.h) bf16 copies (half the bytes); then gy is rounded
// to bf16 for the backward products too, as on bf16 hardware. Gradients land in fp32.
class LinearNode final : public Node {
 public:
  LinearNode(Tensor x, Tensor w, bool hasBias) : x_(std::move(x)), w_(std::move(w)), hasBias_(hasBias) {}
  const char* name() const override { return "linear"; }
  void backward(const Tensor& gy, GradSink& sink) override {
    const int64_t B = x_.size(0), in = x_.size(1), out = w_.size(0);
    if (sink.needs(0) || sink.needs(1)) {
      const Tensor g = x_.dtype() == DType::BF16 ? detail::toBf16(gy.data<float>(), {B, out}) : gy;
      if (sink.needs(0)) {  // dx = gy W
        GradTarget t = sink.target(0);
        product(false, false, B, in, out, g, out, w_, in, t.accumulate ? 1.f : 0.f, t.ptr, in);
      }
      if (sink.needs(1)) {  // dW = gy^T x
        GradTarget t = sink.target(1);
        product(true, false, out, in, B, g, out, x_, in, t.accumulate ? 1.f : 0.f, t.ptr, in);
      }
    }
    if (hasBias_ && sink.needs(2)) {
      GradTarget t = sink.target(2);
      kernels::sumRows(gy.data<float>(), t.ptr, B, out, t.accumulate);
    }
  }
  void release() override { x_ = w_ = Tensor(); }

 private:
  Tensor x_, w_;
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
  // The operands as multiplied, and kept for backward.
  Tensor xs = xd.view({B, in}), ws = wd;
  if (precision() == Precision::BF16) {
    xs = detail::toBf16(xd.data<float>(), {B, in});
    ws = detail::toBf16(wd.data<float>(), {out, in});
  }
  product(false, true, B, out, in, xs, in, ws, in, bias.defined() ? 1.f : 0.f, y.data<float>(),
          out);
  if (!needsGraph({&x, &weight, &bias})) return Variable(std::move(y));
  return record(std::move(y),
                std::make_shared<LinearNode>(std::move(xs), std::move(ws), bias.defined()),
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
