// powersgd: PowerSGD (Vogels et al., NeurIPS 2019) with --compress-rank r, as
// PyTorch's powerSGD_hook does it: each parameter of >= 2 dimensions is a matrix
// M (n = shape[0] rows, m = the rest), approximated by P Q^T with one step of
// power iteration per training step:
//   x = g + e (error feedback);  P = M Q;  allreduce P;  orthogonalize P;
//   Q = M^T P;  allreduce Q, / N;  decoded = P Q^T;  e = M - P Q^T
// Q is kept for the next step (warm start), starting from the same random
// normal matrix on every rank. Aggregation: the factors are summed in the
// compressed domain, which is exact because both are linear in M given the
// other: sum_i M_i Q = (sum_i M_i) Q, and then sum_i M_i^T P = (sum_i M_i)^T P
// (the rank-r approximation of the mean gradient, not a mean of per-rank
// approximations). Parameters of one dimension (biases, norms) and matrices
// the factors would not shrink (n*m <= 2 (n+m) r: PyTorch's min_compression_rate
// 2) go uncompressed in the same allreduce as P, with no error feedback (they
// are averaged exactly). The first --compress-start-step steps are a plain
// allreduce (no error feedback), as PyTorch's start_powerSGD_iter.
// Message: sum over matrices of (n + m) r floats, plus the uncompressed values.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/Rng.h"
#include "parallel/compress/CompressorBasics.h"
#include "parallel/compress/Factories.h"
#include "tensor/cpu/Blas.h"

namespace dtrain::parallel::compress {
namespace {

struct Matrix {
  int64_t offset, rows, cols, rank;  // in the bucket; M is rows x cols, row-major
  Tensor q;                          // cols x rank, row-major: the warm start
};

struct Span {
  int64_t offset, numel;
};

// A parameter as PowerSGD sees it: shape[0] rows by the rest, and the rank of
// its factors (0: it goes whole).
struct Shape {
  int64_t numel, rows, cols, rank;
};
Shape shapeOf(const std::vector<int64_t>& s, const CompressOptions& o) {
  const int64_t n = shapeNumel(s);
  const int64_t rows = s.empty() ? 1 : s[0], cols = rows ? n / rows : 0;
  return {n, rows, cols, s.size() >= 2 ? powerSgdRank(rows, cols, o.rank, o.minCompressionRate) : 0};
}

// Gram-Schmidt on the columns of a (rows x rank, row-major), in place. The
// epsilon keeps an all-zero column (a zero gradient) at zero instead of NaN.
void orthogonalize(float* a, int64_t rows, int64_t rank) {
  for (int64_t c = 0; c < rank; ++c) {
    double sq = 0;
    for (int64_t i = 0; i < rows; ++i) sq += static_cast<double>(a[i * rank + c]) * a[i * rank + c];
    const double inv = 1.0 / (std::sqrt(sq) + 1e-8);
    for (int64_t i = 0; i < rows; ++i) a[i * rank + c] = static_cast<float>(a[i * rank + c] * inv);
    for (int64_t d = c + 1; d < rank; ++d) {
      double dot = 0;
      for (int64_t i = 0; i < rows; ++i) dot += static_cast<double>(a[i * rank + c]) * a[i * rank + d];
      for (int64_t i = 0; i < rows; ++i)
        a[i * rank + d] = static_cast<float>(a[i * rank + d] - dot * a[i * rank + c]);
    }
  }
}

class PowerSgd final : public Compressor {
 public:
  PowerSgd(const CompressOptions& o, const BucketLayout& layout)
      : numel_(layout.numel()), startStep_(o.startStep), feedback_(numel_) {
    int64_t off = 0;
    for (size_t j = 0; j < layout.shapes.size(); ++j) {
      const auto [n, rows, cols, rank] = shapeOf(layout.shapes[j], o);
      if (rank > 0) {
        Matrix m{off, rows, cols, rank, Tensor::zeros({cols, rank})};
        Rng rng(mixSeed(o.seed, layout.index, static_cast<int64_t>(j), 0x9051));
        float* q = m.q.data<float>();
        for (int64_t i = 0; i < cols * rank; ++i) q[i] = rng.normal();
        orthogonalize(q, cols, rank);
        factorSize_ += rows * rank;
        qSize_ += cols * rank;
        matrices_.push_back(std::move(m));
      } else {
        plain_.push_back({off, n});
        plainSize_ += n;
      }
      off += n;
    }
  }

  void reduce(float* grad, comm::Communicator& comm, const ReduceContext& ctx) override {
    comm::Options o;
    o.op = comm::ReduceOp::Sum;
    o.algo = ctx.algo;
    o.tag = ctx.tag;
    const int n = comm.size();
    const float scale = 1.0f / static_cast<float>(n);
    traffic_ = {};
    if (ctx.step < startStep_ || matrices_.empty()) {
      allreduceMean(grad, static_cast<size_t>(numel_), comm, ctx, traffic_);
      return;
    }
    feedback_.addTo(grad);  // grad is now x = g + e
    // One allreduce for every P and the uncompressed values.
    buf_.assign(static_cast<size_t>(factorSize_ + plainSize_), 0.0f);
    float* p = buf_.data();
    for (const auto& m : matrices_) {
      kernels::gemm(false, false, m.rows, m.rank, m.cols, 1.0f, grad + m.offset, m.cols,
                    m.q.data<float>(), m.rank, 0.0f, p, m.rank);  // P = M Q
      p += m.rows * m.rank;
    }
    for (const auto& s : plain_) p = std::copy(grad + s.offset, grad + s.offset + s.numel, p);
    comm.allreduce(buf_.data(), buf_.data(), buf_.size(), DType::F32, o);
    traffic_.payload += static_cast<int64_t>(buf_.size()) * 4;
    // Q = M^T P for each orthogonalized P, in one allreduce.
    qbuf_.assign(static_cast<size_t>(qSize_), 0.0f);
    p = buf_.data();
    float* q = qbuf_.data();
    for (const auto& m : matrices_) {
      orthogonalize(p, m.rows, m.rank);
      kernels::gemm(true, false, m.cols, m.rank, m.rows, 1.0f, grad + m.offset, m.cols, p, m.rank,
                    0.0f, q, m.rank);  // Q = M^T P
      p += m.rows * m.rank;
      q += m.cols * m.rank;
    }
    comm.allreduce(qbuf_.data(), qbuf_.data(), qbuf_.size(), DType::F32, o);
    traffic_.payload += qSize_ * 4;
    // Decode: grad = P Q^T (the residual keeps what it missed); plain values = mean.
    float* e = feedback_.residual().data<float>();
    p = buf_.data();
    q = qbuf_.data();
    for (auto& m : matrices_) {
      float* keep = m.q.data<float>();
      for (int64_t i = 0; i < m.cols * m.rank; ++i) keep[i] = q[i] * scale;
      float* x = grad + m.offset;
      approx_.resize(static_cast<size_t>(m.rows * m.cols));
      kernels::gemm(false, true, m.rows, m.cols, m.rank, 1.0f, p, m.rank, keep, m.rank, 0.0f,
                    approx_.data(), m.cols);  // P Q^T
      for (int64_t i = 0; i < m.rows * m.cols; ++i) {
        e[m.offset + i] = x[i] - approx_[i];
        x[i] = approx_[i];
      }
      p += m.rows * m.rank;
      q += m.cols * m.rank;
    }
    for (const auto& s : plain_) {
      for (int64_t i = 0; i < s.numel; ++i) grad[s.offset + i] = p[i] * scale;
      std::fill(e + s.offset, e + s.offset + s.numel, 0.0f);
      p += s.numel;
    }
  }

  std::vector<std::pair<std::string, Tensor*>> state() override {
    std::vector<std::pair<std::string, Tensor*>> out{{"residual", &feedback_.residual()}};
    for (size_t j = 0; j < matrices_.size(); ++j)
      out.emplace_back("q" + std::to_string(j), &matrices_[j].q);
    return out;
  }

 private:
  const int64_t numel_, startStep_;
  ErrorFeedback feedback_;
  std::vector<Matrix> matrices_;
  std::vector<Span> plain_;
  int64_t factorSize_ = 0, qSize_ = 0, plainSize_ = 0;
  std::vector<float> buf_, qbuf_, approx_;
};

}  // namespace

std::unique_ptr<Compressor> makePowerSgd(const CompressOptions& o, const BucketLayout& layout) {
  return std::make_unique<PowerSgd>(o, layout);
}

int64_t powerSgdWireBytes(const CompressOptions& o, const BucketLayout& layout) {
  int64_t floats = 0;  // P and Q of the factored matrices, the rest whole
  for (const auto& s : layout.shapes) {
    const Shape m = shapeOf(s, o);
    floats += m.rank > 0 ? (m.rows + m.cols) * m.rank : m.numel;
  }
  return floats * static_cast<int64_t>(sizeof(float));
}

}  // namespace dtrain::parallel::compress
