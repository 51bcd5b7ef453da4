#include <gtest/gtest.h>

#include <vector>

#include "autograd/Ops.h"
#include "core/Memory.h"

using namespace dtrain;
using namespace dtrain::autograd;

TEST(Engine, AccumulatesIntoGradAcrossBackwards) {
  Variable x(Tensor::fromVector({1, 2, 3}, {3}), true);
  sum(scale(x, 2.f)).backward();
  sum(scale(x, 3.f)).backward();
  EXPECT_EQ(x.grad().toVector(), (std::vector<float>{5, 5, 5}));
  x.zeroGrad();
  EXPECT_EQ(x.grad().toVector(), (std::vector<float>{0, 0, 0}));
}

TEST(Engine, NoGradScopeRecordsNothing) {
  Variable x(Tensor::fromVector({1, 2}, {2}), true);
  Variable y;
  {
    NoGradGuard g;
    y = scale(x, 2.f);
  }
  EXPECT_FALSE(y.requiresGrad());
  EXPECT_THROW(y.backward(), Error);
  EXPECT_TRUE(scale(x, 2.f).requiresGrad());
}

TEST(Engine, HooksFireWhenGradientIsFinalInReverseOrder) {
  // y = w2 * relu(w1 * x): w2's gradient is final before w1's.
  Variable x(Tensor::fromVector({1, 2}, {1, 2}));
  Variable w1(Tensor::fromVector({1, 0, 0, 1}, {2, 2}), true);
  Variable w2(Tensor::fromVector({1, 1}, {1, 2}), true);
  std::vector<std::string> fired;
  std::vector<float> gradSeen;
  w1.addGradReadyHook([&](Variable& v) {
    fired.push_back("w1");
    gradSeen = v.grad().toVector();
  });
  w2.addGradReadyHook([&](Variable&) { fired.push_back("w2"); });
  Variable loss = sum(linear(relu(linear(x, w1, Variable())), w2, Variable()));
  loss.backward();
  ASSERT_EQ(fired, (std::vector<std::string>{"w2", "w1"}));
  EXPECT_EQ(gradSeen, w1.grad().toVector());  // final when the hook ran
}

TEST(Engine, HookWaitsForAllUsesOfAParameter) {
  Variable w(Tensor::fromVector({2}, {1}), true);
  int calls = 0;
  float seen = 0;
  w.addGradReadyHook([&](Variable& v) {
    ++calls;
    seen = v.grad().item();
  });
  // w used three times: d/dw (w*w + 3w) = 2w + 3 = 7
  Variable y = add(mul(w, w), scale(w, 3.f));
  sum(y).backward();
  EXPECT_EQ(calls, 1);
  EXPECT_FLOAT_EQ(seen, 7.f);
}

TEST(Engine, IntermediatesAreFreedByBackward) {
  Variable x(Tensor::full({64, 256}, 0.5f));
  Variable w(Tensor::full({256, 256}, 0.01f), true);
  auto before = memory::stats().currentBytes;
  {
    Variable loss = sum(relu(linear(relu(linear(x, w, Variable())), w, Variable())));
    EXPECT_GT(memory::stats().currentBytes, before);
    loss.backward();
  }
  // Only w's gradient remains.
  EXPECT_EQ(memory::stats().currentBytes, before + static_cast<int64_t>(w.grad().nbytes()));
}

TEST(Engine, AnOutputOnlyTheGraphHoldsIsFreedDuringForward) {
  // add saves nothing for backward: once user code drops the intermediate
  // a + a, only its shape stays in the graph, not its 4 MB of data.
  const int64_t n = 1 << 20;
  Variable a(Tensor::full({n}, 1.f), true);
  const int64_t before = memory::stats().currentBytes;
  Variable out = add(add(a, a), a);
  EXPECT_EQ(memory::stats().currentBytes - before, n * 4) << "only out's data is held";
  // A handle kept by user code keeps the data (copies share it).
  Variable kept = add(a, a);
  Variable copy = kept;
  kept = Variable();
  ASSERT_TRUE(copy.data().defined());
  EXPECT_FLOAT_EQ(copy.data().data<float>()[7], 2.f);
  EXPECT_EQ(copy.shape(), Shape{n});
  // Backward needs only shapes of the freed intermediate.
  out.backward(Tensor::full({n}, 1.f));
  EXPECT_FLOAT_EQ(a.grad().data<float>()[0], 3.f);
  EXPECT_FLOAT_EQ(a.grad().data<float>()[n - 1], 3.f);
}
