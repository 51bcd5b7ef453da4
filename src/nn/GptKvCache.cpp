#include "nn/GptKvCache.h"

#include <algorithm>
#include <cmath>

#include "autograd/Ops.h"
#include "core/Error.h"

namespace dtrain::nn {

using autograd::add;

GptKvCache::GptKvCache(Gpt& model) : model_(model) {
  const GptConfig& c = model.config();
  keys_.assign(c.nLayer, std::vector<float>(c.blockSize * c.nEmbd));
  values_.assign(c.nLayer, std::vector<float>(c.blockSize * c.nEmbd));
}

std::vector<float> GptKvCache::push(int32_t token) {
  const GptConfig& c = model_.config();
  DTRAIN_CHECK(!full(), "GPT KV cache: already holds a whole block of ", c.blockSize, " positions");
  autograd::NoGradGuard noGrad;
  const int64_t C = c.nEmbd, H = c.nHead, D = C / H, t = size_;
  GptTransformer& tr = *model_.transformer;
  Variable x = add(tr.wte->lookup(Tensor::fromInts({token}, {1, 1})),
                   tr.wpe->lookup(Tensor::fromInts({static_cast<int32_t>(t)}, {1, 1})));
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  std::vector<float> out(C), p(t + 1);
  for (int64_t l = 0; l < c.nLayer; ++l) {
    auto& block = static_cast<GptBlock&>(*tr.h->children()[l].second);
    const Tensor qkv = block.attn->cAttn->forward(block.ln1->forward(x)).data().contiguous();
    const float* q = qkv.data<float>();  // [q | k | v], C each
    float* K = keys_[l].data();
    float* V = values_[l].data();
    std::copy(q + C, q + 2 * C, K + t * C);
    std::copy(q + 2 * C, q + 3 * C, V + t * C);
    // Causal attention of the one new query over positions 0..t, per head.
    for (int64_t h = 0; h < H; ++h) {
      float mx = -INFINITY;
      for (int64_t s = 0; s <= t; ++s) {
        float dot = 0;
        for (int64_t j = 0; j < D; ++j) dot += q[h * D + j] * K[s * C + h * D + j];
        p[s] = dot * scale;
        mx = std::max(mx, p[s]);
      }
      float sum = 0;
      for (int64_t s = 0; s <= t; ++s) sum += p[s] = std::exp(p[s] - mx);
      for (int64_t j = 0; j < D; ++j) {
        float acc = 0;
        for (int64_t s = 0; s <= t; ++s) acc += p[s] * V[s * C + h * D + j];
        out[h * D + j] = acc / sum;
      }
    }
    x = add(x, block.attn->cProj->forward(Variable(Tensor::fromVector(out, {1, 1, C}))));
    x = add(x, block.mlp->forward(block.ln2->forward(x)));
  }
  const Tensor logits =
      autograd::linear(tr.lnF->forward(x), tr.wte->weight, Variable()).data().contiguous();
  ++size_;
  return std::vector<float>(logits.data<float>(), logits.data<float>() + c.vocab);
}

}  // namespace dtrain::nn
