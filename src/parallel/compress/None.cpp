// none: today's path, bitwise: allreduce(sum) of the fp32 gradients, then x 1/N.
#include "parallel/compress/Factories.h"

namespace dtrain::parallel::compress {
namespace {

class None final : public Compressor {
 public:
  explicit None(const BucketLayout& layout) : numel_(static_cast<size_t>(layout.numel())) {}

  void reduce(float* grad, comm::Communicator& comm, const ReduceContext& ctx) override {
    comm::Options o;
    o.op = comm::ReduceOp::Sum;
    o.algo = ctx.algo;
    o.tag = ctx.tag;
    comm.allreduce(grad, grad, numel_, DType::F32, o);
    if (comm.size() > 1) {
      const float scale = 1.0f / static_cast<float>(comm.size());
      for (size_t j = 0; j < numel_; ++j) grad[j] *= scale;
    }
    traffic_ = {};
    traffic_.addAllreduce(static_cast<int64_t>(numel_ * sizeof(float)), comm.size());
  }

 private:
  const size_t numel_;
};

}  // namespace

std::unique_ptr<Compressor> makeNone(const CompressOptions&, const BucketLayout& layout) {
  return std::make_unique<None>(layout);
}

}  // namespace dtrain::parallel::compress
