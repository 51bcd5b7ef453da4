#pragma once
// Sufficient factor broadcasting (--sfb; Xie et al., "Distributed Machine
// Learning via Sufficient Factor Broadcasting", and Poseidon's hybrid; Project
// Adam sends the same factors to its parameter servers).
//
// A Linear layer y = x W^T + b with W of M x N (out x in) gets, from a batch of
// B rows, the weight gradient dW = dY^T X: a sum of B outer products dY_b X_b^T.
// So instead of the M N gradient a rank can send its B input rows X (B x N) and
// B output-gradient rows dY (B x M), B (M + N) values; every rank allgathers
// the factors of all W ranks and rebuilds the same averaged gradient with one
// GEMM, dW = (1/W) dY_all^T X_all over the W B rows. The bias and every other
// parameter keep the allreduce.
//
// Bytes per step and rank: a ring allgather sends (W-1) B (M+N) floats per
// rank, a ring allreduce 2 (W-1)/W M N; so SFB sends fewer bytes while
// B (M + N) < 2 M N / W, and each rank receives the factors of all W B rows.
//
// Capture: a forward wrapper on the Linear module (Module::setForwardWrapper)
// copies each call's input and puts autograd::observeGradient on its output,
// whose backward copies dY. Several calls of one step (micro-batches of
// --accumulate K, a layer used twice) are concatenated in call order, so the
// K micro-batches' factors make one B = K x micro-batch exchange. The rows
// must be the same on every rank (the sampler's global-batch rule makes them
// so). The layer's own dW GEMM still runs in backward (its result is replaced).
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/Communicator.h"
#include "nn/Layers.h"
#include "parallel/compress/Compressor.h"

namespace dtrain::parallel {

enum class SfbMode { Off, On, Auto };
// "off", "on", "auto" (the --sfb values).
SfbMode sfbModeFromName(const std::string& name);

// The per-layer rule of --sfb auto: the allgather of the factors of `rows`
// rows per rank sends fewer bytes than the ring allreduce of the M x N gradient,
// W rows (M + N) < 2 M N (see above; at W = 2 Poseidon's rows (M + N) < M N).
// Poseidon's rule alone ignores that every worker forwards the other W - 1
// workers' factors, so from W = 3 on it keeps SFB where it sends more bytes
// than the allreduce.
inline bool sfbPays(int64_t rows, int64_t in, int64_t out, int workers) {
  return workers * rows * (in + out) < 2 * in * out;
}

// Every Linear module below `model` whose weight is trained, with the weight's
// full name ("1.weight"), in registration order. Shared: a strategy may
// outlive the model it was set up on, and removes its capture at the end.
std::vector<std::pair<std::string, std::shared_ptr<nn::Linear>>> trainedLinearLayers(
    nn::Module& model);

// One layer's factors of the current step. Installs the capture on
// construction and removes it on destruction.
class SufficientFactors {
 public:
  SufficientFactors(std::string weightName, std::shared_ptr<nn::Linear> layer);
  ~SufficientFactors();
  SufficientFactors(const SufficientFactors&) = delete;
  SufficientFactors& operator=(const SufficientFactors&) = delete;

  const std::string& weightName() const { return name_; }
  const autograd::Variable& weight() const { return layer_->weight; }
  // Forgets the last step's factors (at a step's start, training thread).
  void clear() { calls_.clear(); }
  // Allgathers this rank's factors (every call since clear()) and writes the
  // mean over ranks of the rebuilt gradient into `grad` (M x N floats).
  // Collective; runs on the communication thread once the layer's backward is
  // done. Returns the floats this rank handed to the allgather.
  int64_t exchange(float* grad, comm::Communicator& comm, int tag);

 private:
  struct Call {
    Tensor input;       // [rows, in], a copy
    Tensor outputGrad;  // [rows, out], a copy; undefined until backward reaches it
  };
  std::string name_;
  std::shared_ptr<nn::Linear> layer_;
  std::vector<Call> calls_;
  std::vector<float> send_, all_, inputs_, outputGrads_;  // reused across steps
};

// The bucket-level form, so that a layer's exchange runs where a fusion
// bucket's allreduce would (in bucket order, overlapped with backward): a
// bucket holding just the layer's weight, reduced by this instead of a
// compressor.
class SfbReducer final : public compress::Compressor {
 public:
  explicit SfbReducer(SufficientFactors& factors) : factors_(factors) {}
  void reduce(float* grad, comm::Communicator& comm, const compress::ReduceContext& ctx) override {
    traffic_.payload = factors_.exchange(grad, comm, ctx.tag) * static_cast<int64_t>(sizeof(float));
  }

 private:
  SufficientFactors& factors_;
};

}  // namespace dtrain::parallel
