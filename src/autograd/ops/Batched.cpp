// bmm: batched matrix products on sgemm, gradients written straight into their
// targets (beta = 1 when accumulating), as linear and matmul do.
#include "autograd/Ops.h"
#include "autograd/ops/OpUtil.h"
#include "tensor/cpu/Blas.h"

namespace dtrain::autograd {
namespace {

// y[i] = op(a[i]) op(b[i]); op(a) is [M, K], op(b) is [K, N].
struct BmmShape {
  int64_t batch, M, K, N;
  bool transA, transB;
  int64_t lda() const { return transA ? M : K; }
  int64_t ldb() const { return transB ? K : N; }
};

class BmmNode final : public Node {
 public:
  BmmNode(Tensor a, Tensor b, BmmShape s) : a_(std::move(a)), b_(std::move(b)), s_(s) {}
  const char* name() const override { return "bmm"; }
  void backward(const Tensor& gy, GradSink& sink) override {
    const auto& s = s_;
    const float* g = gy.data<float>();
    if (sink.needs(0)) {
      GradTarget t = sink.target(0);
      const float beta = t.accumulate ? 1.f : 0.f;
      if (!s.transA)  // da = gy op(b)^T  [M, K]
        kernels::gemmBatched(false, !s.transB, s.batch, s.M, s.K, s.N, 1.f, g, s.N, s.M * s.N,
                             b_.data<float>(), s.ldb(), s.K * s.N, beta, t.ptr, s.K, s.M * s.K);
      else  // a stored [K, M]: da = op(b) gy^T
        kernels::gemmBatched(s.transB, true, s.batch, s.K, s.M, s.N, 1.f, b_.data<float>(), s.ldb(),
                             s.K * s.N, g, s.N, s.M * s.N, beta, t.ptr, s.M, s.M * s.K);
    }
    if (sink.needs(1)) {
      GradTarget t = sink.target(1);
      const float beta = t.accumulate ? 1.f : 0.f;
      if (!s.transB)  // db = op(a)^T gy  [K, N]
        kernels::gemmBatched(!s.transA, false, s.batch, s.K, s.N, s.M, 1.f, a_.data<float>(),
                             s.lda(), s.M * s.K, g, s.N, s.M * s.N, beta, t.ptr, s.N, s.K * s.N);
      else  // b stored [N, K]: db = gy^T op(a)
        kernels::gemmBatched(true, s.transA, s.batch, s.N, s.K, s.M, 1.f, g, s.N, s.M * s.N,
                             a_.data<float>(), s.lda(), s.M * s.K, beta, t.ptr, s.K, s.K * s.N);
    }
  }
  void release() override { a_ = b_ = Tensor(); }

 private:
  Tensor a_, b_;
  BmmShape s_;
};

}  // namespace

Variable bmm(const Variable& a, const Variable& b, bool transA, bool transB) {
  Tensor ad = detail::contig(a, "bmm", "a"), bd = detail::contig(b, "bmm", "b");
  DTRAIN_CHECK(ad.dim() == 3 && bd.dim() == 3 && ad.size(0) == bd.size(0), "bmm: expected [batch, ., .] x [batch, ., .], got ",
               shapeStr(ad.shape()), " x ", shapeStr(bd.shape()));
  BmmShape s{ad.size(0), ad.size(transA ? 2 : 1), ad.size(transA ? 1 : 2), bd.size(transB ? 1 : 2),
             transA, transB};
  const int64_t kb = bd.size(transB ? 2 : 1);
  DTRAIN_CHECK(kb == s.K, "bmm: inner sizes differ: ", shapeStr(ad.shape()), (transA ? "^T" : ""),
               " x ", shapeStr(bd.shape()), (transB ? "^T" : ""));
  Tensor y = Tensor::empty({s.batch, s.M, s.N});
  kernels::gemmBatched(transA, transB, s.batch, s.M, s.N, s.K, 1.f, ad.data<float>(), s.lda(),
                       s.M * s.K, bd.data<float>(), s.ldb(), s.K * s.N, 0.f, y.data<float>(), s.N,
                       s.M * s.N);
  if (!needsGraph({&a, &b})) return Variable(std::move(y));
  return record(std::move(y), std::make_shared<BmmNode>(ad, bd, s), {&a, &b});
}

}  // namespace dtrain::autograd
