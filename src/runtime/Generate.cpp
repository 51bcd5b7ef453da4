#include "runtime/Generate.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "autograd/Variable.h"
#include "core/Error.h"
#include "core/Rng.h"
#include "nn/GptKvCache.h"

namespace dtrain::runtime {

namespace {

// Draws from softmax(logits / temperature) restricted to the top k.
int32_t sample(const float* logits, int64_t vocab, const GenerateOptions& o, Rng& rng) {
  if (o.temperature == 0) return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
  std::vector<double> z(logits, logits + vocab);
  for (double& v : z) v /= o.temperature;
  if (o.topK > 0 && o.topK < vocab) {
    std::vector<double> sorted = z;
    std::nth_element(sorted.begin(), sorted.begin() + (o.topK - 1), sorted.end(), std::greater<>());
    const double kth = sorted[o.topK - 1];
    for (double& v : z)
      if (v < kth) v = -INFINITY;  // as nanoGPT: logits below the k-th are dropped
  }
  const double mx = *std::max_element(z.begin(), z.end());
  double sum = 0;
  for (double& v : z) sum += v = std::exp(v - mx);
  double u = static_cast<double>(rng.uniform()) * sum;
  for (int64_t i = 0; i < vocab; ++i) {
    u -= z[i];
    if (u < 0) return static_cast<int32_t>(i);
  }
  // Rounding left u >= 0: the last token with any probability.
  for (int64_t i = vocab - 1; i >= 0; --i)
    if (z[i] > 0) return static_cast<int32_t>(i);
  return 0;
}

}  // namespace

std::vector<int32_t> generate(nn::Module& model, int64_t blockSize, std::vector<int32_t> tokens,
                              const GenerateOptions& o,
                              const std::function<void(int32_t)>& onToken) {
  DTRAIN_CHECK_USAGE(o.maxNewTokens >= 0, "--max-new-tokens must be >= 0 (got ", o.maxNewTokens, ")");
  DTRAIN_CHECK_USAGE(std::isfinite(o.temperature) && o.temperature >= 0,
                     "--temperature must be a finite number >= 0 (got ", o.temperature, ")");
  DTRAIN_CHECK_USAGE(o.topK >= 0, "--top-k must be >= 0 (got ", o.topK, ")");
  DTRAIN_CHECK_USAGE(!tokens.empty(), "--prompt is empty: the model needs at least one token to continue");
  DTRAIN_CHECK_USAGE(static_cast<int64_t>(tokens.size()) <= blockSize, "--prompt has ",
                     tokens.size(), " tokens, more than the model's block of ", blockSize);
  autograd::NoGradGuard noGrad;
  const bool wasTraining = model.isTraining();
  model.eval();
  Rng rng(o.seed);
  // The KV cache serves while the context fits in the block; past it the
  // context is cropped (positions shift, so cached keys no longer apply) and
  // each step runs the whole cropped context, as nanoGPT does.
  std::optional<nn::GptKvCache> cache;
  if (auto* gpt = dynamic_cast<nn::Gpt*>(&model); gpt && o.kvCache) cache.emplace(*gpt);
  std::vector<float> cached;  // the cache's logits of its last position
  for (int64_t n = 0; n < o.maxNewTokens; ++n) {
    const int64_t size = static_cast<int64_t>(tokens.size());
    int32_t next;
    if (cache && size <= blockSize) {
      while (cache->size() < size) cached = cache->push(tokens[cache->size()]);
      next = sample(cached.data(), static_cast<int64_t>(cached.size()), o, rng);
    } else {
      const int64_t t = std::min(blockSize, size);
      Tensor x = Tensor::empty({1, t}, DType::I32);
      std::copy(tokens.end() - t, tokens.end(), x.data<int32_t>());
      Tensor logits = model.forward(autograd::Variable(x)).data().contiguous();  // [1, t, V]
      const int64_t vocab = logits.shape().back();
      next = sample(logits.data<float>() + (t - 1) * vocab, vocab, o, rng);
    }
    tokens.push_back(next);
    if (onToken) onToken(next);
  }
  model.train(wasTraining);
  return tokens;
}

}  // namespace dtrain::runtime
