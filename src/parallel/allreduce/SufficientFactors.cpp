#include "parallel/allreduce/SufficientFactors.h"

#include <algorithm>
#include <cstring>

#include "autograd/Ops.h"
#include "core/Error.h"
#include "tensor/cpu/Blas.h"

namespace dtrain::parallel {

SfbMode sfbModeFromName(const std::string& name) {
  if (name == "off") return SfbMode::Off;
  if (name == "on") return SfbMode::On;
  if (name == "auto") return SfbMode::Auto;
  throw UsageError("--sfb must be off, on or auto (got '" + name + "')");
}

namespace {
void collectTrainedLinears(const nn::Module& m, const std::string& prefix,
                           std::vector<std::pair<std::string, std::shared_ptr<nn::Linear>>>& out) {
  for (auto& [name, child] : m.children()) {
    const std::string path = prefix + name + ".";
    if (auto linear = std::dynamic_pointer_cast<nn::Linear>(child))
      if (linear->weight.defined() && linear->weight.requiresGrad())
        out.emplace_back(path + "weight", linear);
    collectTrainedLinears(*child, path, out);
  }
}
}  // namespace

std::vector<std::pair<std::string, std::shared_ptr<nn::Linear>>> trainedLinearLayers(
    nn::Module& model) {
  std::vector<std::pair<std::string, std::shared_ptr<nn::Linear>>> out;
  collectTrainedLinears(model, "", out);
  return out;
}

SufficientFactors::SufficientFactors(std::string weightName, std::shared_ptr<nn::Linear> layer)
    : name_(std::move(weightName)), layer_(std::move(layer)) {
  layer_->setForwardWrapper([this](const autograd::Variable& x, const nn::Module::Forward& forward) {
    autograd::Variable y = forward(x);
    // Evaluation (no grad) and frozen layers leave nothing to exchange.
    if (!y.requiresGrad() || !autograd::gradEnabled()) return y;
    const int64_t in = layer_->weight.shape()[1];
    const Tensor input = x.data().contiguous();
    Call call;
    call.input = input.clone().view({input.numel() / in, in});
    calls_.push_back(std::move(call));
    const size_t index = calls_.size() - 1;
    return autograd::observeGradient(y, [this, index](const Tensor& g) {
      const int64_t out = layer_->weight.shape()[0];
      const Tensor c = g.contiguous();
      calls_[index].outputGrad = c.clone().view({c.numel() / out, out});
    });
  });
}

SufficientFactors::~SufficientFactors() { layer_->setForwardWrapper(nullptr); }

int64_t SufficientFactors::exchange(float* grad, comm::Communicator& comm, int tag) {
  const int64_t out = layer_->weight.shape()[0], in = layer_->weight.shape()[1];
  int64_t rows = 0;
  for (const Call& c : calls_) rows += c.input.size(0);
  const int64_t world = comm.size();
  if (rows == 0) {  // the layer did not run this step (on any rank: the rows are equal)
    std::fill(grad, grad + out * in, 0.0f);
    return 0;
  }
  // This rank's message: its X rows, then its dY rows, in call order. A call
  // whose output got no gradient (not used by the loss) contributes zeros.
  const size_t per = static_cast<size_t>(rows * (in + out));
  send_.assign(per, 0.0f);
  float* xs = send_.data();
  float* gs = send_.data() + rows * in;
  for (const Call& c : calls_) {
    const int64_t r = c.input.size(0);
    std::memcpy(xs, c.input.data<float>(), sizeof(float) * r * in);
    if (c.outputGrad.defined()) {
      DTRAIN_CHECK(c.outputGrad.size(0) == r, "sfb: ", name_, ": ", r, " input rows but ",
                   c.outputGrad.size(0), " output-gradient rows");
      std::memcpy(gs, c.outputGrad.data<float>(), sizeof(float) * r * out);
    }
    xs += r * in;
    gs += r * out;
  }
  all_.resize(per * static_cast<size_t>(world));
  comm::Options o;
  o.tag = tag;
  comm.allgather(send_.data(), all_.data(), per, DType::F32, o);
  // Every rank's rows stacked (rank order) into X_all [W rows, in] and
  // dY_all [W rows, out], then one GEMM: dW = (1/W) dY_all^T X_all, the mean
  // the allreduce would produce (each rank's dY already carries its 1/B).
  inputs_.resize(static_cast<size_t>(world * rows * in));
  outputGrads_.resize(static_cast<size_t>(world * rows * out));
  for (int64_t r = 0; r < world; ++r) {
    const float* src = all_.data() + per * static_cast<size_t>(r);
    std::memcpy(inputs_.data() + r * rows * in, src, sizeof(float) * rows * in);
    std::memcpy(outputGrads_.data() + r * rows * out, src + rows * in, sizeof(float) * rows * out);
  }
  kernels::gemm(true, false, out, in, world * rows, 1.0f / static_cast<float>(world),
                outputGrads_.data(), out, inputs_.data(), in, 0.0f, grad, in);
  return static_cast<int64_t>(per);
}

}  // namespace dtrain::parallel
