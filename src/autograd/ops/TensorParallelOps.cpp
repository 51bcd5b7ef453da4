// Megatron's conjugate operators f and g (Shoeybi et al. 2019, section 3), the
// only communication of a tensor-parallel layer pair:
//   copyToTensorParallel (f): identity forward; backward sums the input's
//     gradient over the group (each rank's column shard saw the whole input,
//     so the input's gradient is the sum of every shard's contribution).
//   reduceFromTensorParallel (g): forward sums the row-parallel partial
//     products over the group and adds the (replicated) bias once; backward
//     is the identity (every rank's partial product fed the same sum).
// With these two, every tensor outside the parallel region (the residual
// stream, LayerNorm's inputs and their gradients) is identical on every rank,
// so replicated parameters get identical gradients without communication.
#include <cstring>

#include "autograd/Ops.h"
#include "autograd/ops/OpUtil.h"

namespace dtrain::autograd {
namespace {

using detail::contig;

class CopyToRegionNode final : public Node {
 public:
  explicit CopyToRegionNode(SumAcrossRanks sum) : sum_(std::move(sum)) {}
  const char* name() const override { return "tp_copy"; }
  void backward(const Tensor& gy, GradSink& sink) override {
    if (!sink.needs(0)) return;
    const int64_t n = gy.numel();
    detail::writeGrad(sink, 0, n, [&](float* out) {
      std::memcpy(out, gy.data<float>(), static_cast<size_t>(n) * sizeof(float));
      sum_(out, n);
    });
  }

 private:
  SumAcrossRanks sum_;
};

class ReduceFromRegionNode final : public Node {
 public:
  ReduceFromRegionNode(int64_t rows, int64_t cols, bool hasBias)
      : rows_(rows), cols_(cols), hasBias_(hasBias) {}
  const char* name() const override { return "tp_reduce"; }
  void backward(const Tensor& gy, GradSink& sink) override {
    if (sink.needs(0)) detail::writeScaled(sink, 0, 1.f, gy.data<float>(), gy.numel());
    if (hasBias_ && sink.needs(1)) {
      GradTarget t = sink.target(1);
      kernels::sumRows(gy.data<float>(), t.ptr, rows_, cols_, t.accumulate);
    }
  }

 private:
  int64_t rows_, cols_;
  bool hasBias_;
};

// Row blocks of dim 0: a rank's part of a batch stacked over the group.
class GatherBatchNode final : public Node {
 public:
  GatherBatchNode(int rank, int64_t n) : rank_(rank), n_(n) {}
  const char* name() const override { return "gather_batch"; }
  void backward(const Tensor& gy, GradSink& sink) override {
    if (sink.needs(0)) detail::writeScaled(sink, 0, 1.f, gy.data<float>() + rank_ * n_, n_);
  }

 private:
  int rank_;
  int64_t n_;
};

class ScatterBatchNode final : public Node {
 public:
  ScatterBatchNode(int size, int64_t n, GatherAcrossRanks gather)
      : size_(size), n_(n), gather_(std::move(gather)) {}
  const char* name() const override { return "scatter_batch"; }
  void backward(const Tensor& gy, GradSink& sink) override {
    if (!sink.needs(0)) return;
    detail::writeGrad(sink, 0, n_ * size_, [&](float* out) {
      gather_(gy.data<float>(), out, n_);
      kernels::scale(out, 1.f / static_cast<float>(size_), out, n_ * size_);
    });
  }

 private:
  int size_;
  int64_t n_;
  GatherAcrossRanks gather_;
};

}  // namespace

Variable gatherBatch(const Variable& x, int rank, int size, const GatherAcrossRanks& gather) {
  Tensor xd = contig(x, "gatherBatch", "input");
  DTRAIN_CHECK(xd.dim() >= 1 && rank >= 0 && rank < size, "gatherBatch: rank ", rank, " of ", size);
  Shape shape = xd.shape();
  shape[0] *= size;
  Tensor y = Tensor::empty(shape);
  gather(xd.data<float>(), y.data<float>(), xd.numel());
  if (!needsGraph({&x})) return Variable(std::move(y));
  return record(std::move(y), std::make_shared<GatherBatchNode>(rank, xd.numel()), {&x});
}

Variable scatterBatch(const Variable& y, int rank, int size, const GatherAcrossRanks& gather) {
  Tensor yd = contig(y, "scatterBatch", "input");
  DTRAIN_CHECK(yd.dim() >= 1 && yd.size(0) % size == 0 && rank >= 0 && rank < size, "scatterBatch: ",
               yd.size(0), " rows do not cut into ", size, " parts");
  const int64_t rows = yd.size(0) / size;
  Tensor mine = yd.slice(0, rank * rows, (rank + 1) * rows).contiguous();
  if (!needsGraph({&y})) return Variable(std::move(mine));
  const int64_t n = mine.numel();
  return record(std::move(mine), std::make_shared<ScatterBatchNode>(size, n, gather), {&y});
}

Variable copyToTensorParallel(const Variable& x, const SumAcrossRanks& sum) {
  Tensor xd = contig(x, "copyToTensorParallel", "input");
  // The output shares the input's storage: nothing writes either in place.
  if (!needsGraph({&x})) return Variable(std::move(xd));
  return record(std::move(xd), std::make_shared<CopyToRegionNode>(sum), {&x});
}

Variable reduceFromTensorParallel(const Variable& partial, const Variable& bias,
                                  const SumAcrossRanks& sum) {
  Tensor y = contig(partial, "reduceFromTensorParallel", "partial").clone();
  const int64_t cols = y.shape().back(), rows = y.numel() / cols;
  sum(y.data<float>(), y.numel());
  if (bias.defined()) {
    Tensor b = contig(bias, "reduceFromTensorParallel", "bias");
    DTRAIN_CHECK(b.numel() == cols, "reduceFromTensorParallel: bias of ", b.numel(),
                 " elements for rows of ", cols);
    float* out = y.data<float>();
    for (int64_t r = 0; r < rows; ++r) kernels::add(out + r * cols, b.data<float>(), out + r * cols, cols);
  }
  if (!needsGraph({&partial, &bias})) return Variable(std::move(y));
  return record(std::move(y), std::make_shared<ReduceFromRegionNode>(rows, cols, bias.defined()),
                {&partial, &bias});
}

}  // namespace dtrain::autograd
