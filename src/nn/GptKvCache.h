#pragma once
// Incremental decoding of a Gpt with a key/value cache: each new token runs
// the model on that one position, attending to the keys and values every
// earlier position left in the cache, instead of re-running the whole context
// (what `dtrain generate` would do otherwise: O(T) less work per token). The
// logits equal the last row of Gpt::forward on the whole context (within
// float rounding; tested). Inference only (no grad); holds up to the model's
// block of positions: past it, a caller crops the context and starts over.
#include <cstdint>
#include <vector>

#include "nn/Gpt.h"

namespace dtrain::nn {

class GptKvCache {
 public:
  explicit GptKvCache(Gpt& model);
  // Feeds `token` at position size(); returns its next-token logits [vocab].
  // Throws dtrain::Error when the cache already holds a whole block.
  std::vector<float> push(int32_t token);
  int64_t size() const { return size_; }
  bool full() const { return size_ >= model_.config().blockSize; }
  void clear() { size_ = 0; }

 private:
  Gpt& model_;
  int64_t size_ = 0;
  // Per layer: keys and values of the cached positions, [blockSize, nEmbd] each.
  std::vector<std::vector<float>> keys_, values_;
};

}  // namespace dtrain::nn
