// Incremental decoding with the KV cache gives the logits of the full forward.
#include <gtest/gtest.h>

#include <cmath>

#include "nn/GptKvCache.h"

using namespace dtrain;
using namespace dtrain::nn;

TEST(GptKvCache, EveryPositionMatchesTheFullForward) {
  GptConfig c;
  c.nLayer = 2;
  c.nHead = 4;
  c.nEmbd = 32;
  c.blockSize = 12;
  auto model = makeGpt(c, 5);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 12; ++i) tokens.push_back((i * 37 + 11) % 256);
  Tensor all = model->forward(Variable(Tensor::fromInts(tokens, {1, 12}))).data().contiguous();
  GptKvCache cache(*model);
  for (int64_t t = 0; t < 12; ++t) {
    const std::vector<float> got = cache.push(tokens[t]);
    ASSERT_EQ(got.size(), 256u);
    double diff = 0, norm = 0;
    for (int64_t v = 0; v < 256; ++v) {
      const double ref = all.data<float>()[t * 256 + v];
      diff = std::max(diff, std::abs(got[v] - ref));
      norm = std::max(norm, std::abs(ref));
    }
    EXPECT_LT(diff, 1e-5 * std::max(1.0, norm)) << "position " << t;
  }
  EXPECT_TRUE(cache.full());
  EXPECT_THROW(cache.push(1), Error);
  cache.clear();
  EXPECT_EQ(cache.size(), 0);
}
