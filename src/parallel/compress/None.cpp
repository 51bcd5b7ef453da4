// none: today's path, bitwise: allreduce(sum) of the fp32 gradients, then x 1/N.
#include "parallel/compress/CompressorBasics.h"
#include "parallel/compress/Factories.h"

namespace dtrain::parallel::compress {
namespace {

class None final : public Compressor {
 public:
  explicit None(const BucketLayout& layout) : numel_(static_cast<size_t>(layout.numel())) {}

  void reduce(float* grad, comm::Communicator& comm, const ReduceContext& ctx) override {
    traffic_ = {};
    allreduceMean(grad, numel_, comm, ctx, traffic_);
  }

 private:
  const size_t numel_;
};

}  // namespace

std::unique_ptr<Compressor> makeNone(const CompressOptions&, const BucketLayout& layout) {
  return std::make_unique<None>(layout);
}

int64_t noneWireBytes(const CompressOptions&, const BucketLayout& layout) {
  return layout.numel() * static_cast<int64_t>(sizeof(float));
}

}  // namespace dtrain::parallel::compress
