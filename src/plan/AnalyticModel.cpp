#include "plan/AnalyticModel.h"

#include <numeric>

#include "core/Error.h"
#include "nn/Gpt.h"
#include "nn/ModelRegistry.h"
#include "runtime/Task.h"

namespace dtrain::plan {

int64_t AnalyticLayer::params() const { return std::accumulate(tensors.begin(), tensors.end(), int64_t{0}); }

int64_t AnalyticModel::params() const {
  int64_t n = 0;
  for (const auto& l : layers) n += l.params();
  return n;
}

double AnalyticModel::forwardFlops() const {
  double f = 0;
  for (const auto& l : layers) f += l.forwardFlops;
  return f;
}

AnalyticModel gptProfile(const std::string& name, const GptShape& s) {
  const double C = static_cast<double>(s.width), T = static_cast<double>(s.sequence);
  const double V = static_cast<double>(s.vocab), A = static_cast<double>(s.heads);
  AnalyticModel p;
  p.name = name;
  p.languageModel = true;
  p.tokensPerSample = s.sequence;
  p.width = s.width;
  const int64_t c = s.width;
  // Embeddings: wte [V, C] (tied with lm_head), wpe [block, C]; a lookup, no GEMM.
  p.heads = s.heads;
  p.recomputeExtraBytes = 4 * T * 7 * C;  // measured: the block's gradient temporaries
  AnalyticLayer emb;
  emb.name = "embedding";
  emb.sequenceNames = {"embedding"};
  // The token and position embeddings' sum, the first block's input (measured
  // on a pipeline's first stage, tests/plan).
  if (!s.megatron) emb.activationBytes = 4 * T * C;
  emb.tensors = {s.vocab * c, s.sequence * c};
  emb.tables = {{s.vocab, c}, {s.sequence, c}};
  if (s.megatron) emb.tensorParallelParams = s.vocab * c;
  p.layers.push_back(emb);
  for (int64_t i = 0; i < s.layers; ++i) {
    AnalyticLayer b;
    b.name = "transformer.h." + std::to_string(i);
    b.sequenceNames = {b.name};
    // ln_1, c_attn, c_proj, ln_2, c_fc, mlp.c_proj: 12C^2 + 13C.
    b.tensors = {c, c, 3 * c * c, 3 * c, c * c, c, c, c, 4 * c * c, 4 * c, 4 * c * c, c};
    b.linears = {{c, 3 * c}, {c, c}, {c, 4 * c}, {4 * c, c}};
    // Column-parallel c_attn and c_fc (weights and biases), row-parallel
    // weights of both c_proj: everything but the LayerNorms and c_proj's biases.
    b.tensorParallelParams = 12 * c * c + 7 * c;
    // Megatron's count per token: QKV 6C^2, scores and values 4TC (a full
    // T x T product per head), c_proj 2C^2, MLP 16C^2.
    b.forwardFlops = T * (24 * C * C + 4 * T * C);
    // What autograd keeps per token, fp32 (measured on dtrain's memory_per_rank,
    // tests/plan): fused attention keeps no T x T scores (Korthikanti et al.
    // count 5 A T more for unfused attention); LayerNorm outputs and residuals
    // 4 C whole, q/k/v, attention output and MLP hidden (12 C) cut by tensor
    // parallelism, 2 per head (softmax statistics).
    b.activationBytes = 4 * T * (4 * C + 2);
    b.activationBytesCut = 4 * T * (12 * C + 2 * A);
    b.recomputeKeptBytes = 4 * T * C;
    b.backwardTransientBytes = 4 * T * 6 * C;  // measured: on a pipeline stage's first backward
    b.tensorParallelSums = 2;  // attention's and MLP's g
    b.computeCut = true;
    // Elementwise traffic per token: LayerNorms (2 x 2C) and residual adds
    // (2 x 3C) on the whole width; q/k/v layout (6C), attention output (4C)
    // and GELU (8C) on the group's slice. Megatron's: fused bias-dropout-adds
    // (2 x 3.5C) whole, transposes (8C) and bias-GELU (8C) cut, and the
    // attention probabilities (A T each: softmax read + write, dropout read,
    // write and its mask) cut: 4.5 A T.
    const double eb = s.megatron ? 2 : 4;
    b.elementwiseBytes = eb * T * (s.megatron ? 11 * C : 10 * C);
    b.elementwiseBytesCut = eb * T * (s.megatron ? 16 * C + 4.5 * A * T : 18 * C);
    p.layers.push_back(b);
  }
  // ln_f, and lm_head: its weight is wte's (counted there), its product 2 C V per token.
  AnalyticLayer head;
  head.name = "head";
  head.sequenceNames = {"head"};
  head.tensors = {c, c};
  head.forwardFlops = 2 * T * C * V;
  if (s.megatron) {  // its weight is the embedding's, cut with it (counted there)
    head.computeCut = true;
    head.activationBytesCut = 4 * T * 2 * V;
    head.activationBytes = 4 * T * 2 * C;
  }
  // Measured per stage of a pipeline: the logits and the loss's 2 values a
  // token; its backward's first allocation is the logits' gradient. (Megatron's
  // 2021 count: ln_f's output, logits and their softmax.)
  head.activationBytes = s.megatron ? 4 * T * (2 * C + 2 * V) : 4 * T * (V + 2);
  if (!s.megatron) head.backwardTransientBytes = 4 * T * V;
  head.elementwiseBytes = (s.megatron ? 2 : 4) * T * (2 * C + 3 * V);  // ln_f, softmax cross-entropy
  p.layers.push_back(head);
  return p;
}

AnalyticModel mlpProfile(int64_t inputs, const std::vector<int64_t>& hidden, int64_t classes) {
  AnalyticModel p;
  p.name = "mlp";
  std::vector<int64_t> widths{inputs};
  widths.insert(widths.end(), hidden.begin(), hidden.end());
  widths.push_back(classes);
  p.width = inputs;
  // The sequence, one profile layer per sequence layer (so that a pipeline is
  // cut where the trainer cuts it, and each stage sends its own boundary's
  // width): 0 Flatten, then Linear and ReLU pairs, the last Linear alone.
  AnalyticLayer flatten;
  flatten.name = "0";
  flatten.sequenceNames = {flatten.name};
  flatten.outputWidth = inputs;
  p.layers.push_back(flatten);
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    const int64_t in = widths[i], out = widths[i + 1];
    const bool hiddenLayer = i + 2 < widths.size();
    AnalyticLayer l;
    l.name = std::to_string(2 * i + 1);
    l.sequenceNames = {l.name};
    l.tensors = {out * in, out};
    l.linears = {{in, out}};
    // Tensor parallelism pairs Linear -> ReLU -> Linear within each stage's
    // run of layers (pairedForLayout).
    l.sequenceLinear = true;
    l.inputWidth = in;
    l.forwardFlops = 2.0 * static_cast<double>(in * out);
    l.outputWidth = out;
    // Measured: the hidden layers' outputs before and after the ReLU (the
    // input batch and the logits are not the model's activations).
    l.activationBytes = hiddenLayer ? 4.0 * static_cast<double>(out) : 0;
    p.layers.push_back(l);
    if (!hiddenLayer) break;
    AnalyticLayer relu;
    relu.name = std::to_string(2 * i + 2);
    relu.sequenceNames = {relu.name};
    relu.outputWidth = out;
    relu.activationBytes = 4.0 * static_cast<double>(out);
    relu.elementwiseBytes = 8.0 * static_cast<double>(out);  // reads and writes its input's width
    relu.sequenceActivation = true;
    relu.inputWidth = out;
    p.layers.push_back(relu);
  }
  return p;
}

namespace {

nn::ModelOverrides overridesOf(const api::RunConfig& rc) { return runtime::modelOverrides(rc.train); }

// Models without an analytic profile: the parameters from the real module,
// the activations as calibrate measured them (what its layers held after
// forward, over the micro-batch nearest the run's), as one layer.
AnalyticModel countedProfile(const api::RunConfig& rc, const ModelCalibration& measured) {
  AnalyticModel p;
  p.name = rc.train.model;
  const auto model = nn::buildModel(rc.train.model, overridesOf(rc), 0, runtime::dataShape(rc.train));
  AnalyticLayer all;
  all.name = "model";
  for (const auto& [name, param] : model->namedParameters()) all.tensors.push_back(param.numel());
  if (const auto* nearest = measured.nearest(rc.train.batchSize)) {
    double held = 0;
    for (const LayerTime& l : nearest->second.layers) held += static_cast<double>(l.activationBytes);
    all.activationBytes = held / static_cast<double>(nearest->first);
  }
  p.layers.push_back(all);
  return p;
}

}  // namespace

AnalyticModel profileFor(const api::RunConfig& rc, const Machine* machine) {
  const auto& c = rc.train;
  const nn::ModelInfo info = nn::modelInfo(c.model, overridesOf(rc));
  for (const auto& preset : nn::gptPresetNames()) {
    if (c.model != preset) continue;
    const nn::GptConfig g = nn::gptConfig(c.model);
    GptShape s{c.nLayer.value_or(g.nLayer), c.nHead.value_or(g.nHead), c.nEmbd.value_or(g.nEmbd),
               info.blockSize, info.vocab};
    return gptProfile(c.model, s);
  }
  if (c.model == "mlp") {
    const nn::DataShape d = runtime::dataShape(c);
    int64_t inputs = 1;
    for (int64_t x : d.sample) inputs *= x;
    std::vector<int64_t> hidden(c.mlpHidden.begin(), c.mlpHidden.end());
    if (hidden.empty()) hidden = {256, 256};
    return mlpProfile(inputs, hidden, d.classes);
  }
  const ModelCalibration* measured = nullptr;
  if (machine)
    if (auto it = machine->models.find(c.model); it != machine->models.end()) measured = &it->second;
  DTRAIN_CHECK_USAGE(measured, "no cost profile for --model ", c.model,
                     ": the simulator counts FLOPs for mlp and the gpt models; for other models "
                     "give a machine file whose \"models\" section has measured times for it "
                     "(dtrain calibrate)");
  return countedProfile(rc, *measured);
}

int64_t builtModelParams(const api::RunConfig& rc) {
  const auto model = nn::buildModel(rc.train.model, overridesOf(rc), 0, runtime::dataShape(rc.train));
  int64_t n = 0;
  for (const auto& [name, param] : model->namedParameters()) n += param.numel();
  return n;
}

}  // namespace dtrain::plan
