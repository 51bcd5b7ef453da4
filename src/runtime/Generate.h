#pragma once
// Sampling text from a trained language model, as nanoGPT's sample.py: at each
// step the model reads the last `blockSize` tokens (the context is cropped
// once it is longer), the last position's logits are divided by the
// temperature, cut to the top k, and a token is drawn from their softmax.
// Deterministic for a seed. A Gpt decodes with a KV cache while the context
// fits in its block (one position per token); past it, and for other models,
// every step runs the whole (cropped) context.
#include <cstdint>
#include <functional>
#include <vector>

#include "nn/Module.h"

namespace dtrain::runtime {

struct GenerateOptions {
  int64_t maxNewTokens = 200;
  double temperature = 0.8;  // 0: greedy (argmax)
  int64_t topK = 40;         // 0: the whole vocabulary
  uint64_t seed = 1;
  bool kvCache = true;  // gpt models: decode incrementally (nn/GptKvCache.h)
};

// Throws UsageError for a negative token count, temperature or top k, and for
// an empty prompt or one longer than `blockSize`. `onToken`, if given, sees
// each new token as it is drawn.
std::vector<int32_t> generate(nn::Module& model, int64_t blockSize, std::vector<int32_t> prompt,
                              const GenerateOptions& options,
                              const std::function<void(int32_t)>& onToken = {});

}  // namespace dtrain::runtime
