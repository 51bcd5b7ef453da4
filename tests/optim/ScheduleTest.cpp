#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "core/Error.h"
#include "optim/LrSchedule.h"

using namespace dtrain;
using namespace dtrain::optim;

TEST(Schedule, Constant) {
  auto s = makeSchedule("constant", 0.1);
  for (int64_t t : {0, 1, 1000000}) EXPECT_DOUBLE_EQ(s->lrAt(t), 0.1);
  EXPECT_EQ(s->describe(), "constant(lr=0.1)");
}

TEST(Schedule, StepDecaysEveryStepSize) {
  auto s = makeSchedule("step", 1.0, {.stepSize = 3, .gamma = 0.5});
  const double want[] = {1, 1, 1, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.125};
  for (int t = 0; t < 10; ++t) EXPECT_DOUBLE_EQ(s->lrAt(t), want[t]) << "step " << t;
}

TEST(Schedule, CosineFollowsTorchClosedFormThenHoldsEtaMin) {
  auto s = makeSchedule("cosine", 0.1, {.tMax = 100, .etaMin = 0.001});
  EXPECT_DOUBLE_EQ(s->lrAt(0), 0.1);
  EXPECT_NEAR(s->lrAt(50), 0.001 + 0.099 / 2, 1e-15);
  EXPECT_NEAR(s->lrAt(25), 0.001 + 0.099 * (1 + std::cos(std::numbers::pi / 4)) / 2, 1e-15);
  EXPECT_NEAR(s->lrAt(99), 0.001 + 0.099 * (1 + std::cos(std::numbers::pi * 0.99)) / 2, 1e-15);
  EXPECT_DOUBLE_EQ(s->lrAt(100), 0.001);
  EXPECT_DOUBLE_EQ(s->lrAt(1000), 0.001);
  for (int t = 1; t <= 100; ++t) EXPECT_LE(s->lrAt(t), s->lrAt(t - 1));
}

TEST(Schedule, LinearWarmupThenTheWrappedSchedule) {
  auto s = makeSchedule("step", 0.8, {.stepSize = 2, .gamma = 0.1, .warmupSteps = 4});
  EXPECT_DOUBLE_EQ(s->lrAt(0), 0.2);
  EXPECT_DOUBLE_EQ(s->lrAt(1), 0.4);
  EXPECT_DOUBLE_EQ(s->lrAt(2), 0.6);
  EXPECT_DOUBLE_EQ(s->lrAt(3), 0.8);
  EXPECT_DOUBLE_EQ(s->lrAt(4), 0.8);  // wrapped schedule's step 0
  EXPECT_DOUBLE_EQ(s->lrAt(5), 0.8);
  EXPECT_NEAR(s->lrAt(6), 0.08, 1e-15);
  auto c = makeSchedule("cosine", 1.0, {.tMax = 10, .warmupSteps = 2});
  EXPECT_DOUBLE_EQ(c->lrAt(0), 0.5);
  EXPECT_DOUBLE_EQ(c->lrAt(2), 1.0);
  EXPECT_NEAR(c->lrAt(6), 0.5, 1e-15);  // half-way through the 8 decay steps
  EXPECT_DOUBLE_EQ(c->lrAt(10), 0.0);
  EXPECT_EQ(c->describe(), "warmup(steps=2, then cosine(lr=1, t_max=8, eta_min=0))");
}

// nanoGPT's get_lr with lr_decay_iters = max_iters: the warmup reaches the peak,
// and the cosine after it reaches the floor at the run's last step, not W steps later.
TEST(Schedule, CosineWithWarmupEndsAtTheFloorOnTheLastStep) {
  const double peak = 0.1, floor = 0.001;
  const int64_t total = 200, warmup = 50;
  auto s = makeSchedule("cosine", peak, {.tMax = total, .etaMin = floor, .warmupSteps = warmup});
  EXPECT_DOUBLE_EQ(s->lrAt(warmup - 1), peak);  // the warmup's last step
  EXPECT_DOUBLE_EQ(s->lrAt(warmup), peak);      // the cosine's first
  for (int64_t t = warmup; t <= total; ++t) {
    const double ratio = static_cast<double>(t - warmup) / static_cast<double>(total - warmup);
    const double want = floor + (peak - floor) * 0.5 * (1.0 + std::cos(std::numbers::pi * ratio));
    EXPECT_NEAR(s->lrAt(t), want, 1e-15) << "step " << t;
  }
  EXPECT_DOUBLE_EQ(s->lrAt(total), floor);
  EXPECT_DOUBLE_EQ(s->lrAt(total + 7), floor);
  // A warmup as long as the run never decays, and is no error.
  auto allWarmup = makeSchedule("cosine", peak, {.tMax = 10, .warmupSteps = 10});
  EXPECT_DOUBLE_EQ(allWarmup->lrAt(9), peak);
}

TEST(Schedule, IsAPureFunctionOfTheStep) {
  auto s = makeSchedule("cosine", 0.1, {.tMax = 50, .warmupSteps = 5});
  const double at30 = s->lrAt(30);
  for (int t = 0; t < 60; ++t) s->lrAt(t);
  EXPECT_EQ(s->lrAt(30), at30);
  EXPECT_THROW(s->lrAt(-1), Error);
}

namespace {
std::string scheduleError(const std::string& name, double lr, const ScheduleOptions& o) {
  try {
    makeSchedule(name, lr, o);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Schedule, FactoryErrorsNameTheFlag) {
  EXPECT_NE(scheduleError("exponential", 0.1, {}).find(
                "unknown --schedule 'exponential' (known: constant, step, cosine)"),
            std::string::npos);
  EXPECT_NE(scheduleError("step", 0.1, {}).find("invalid --step-size 0"), std::string::npos);
  EXPECT_NE(scheduleError("step", 0.1, {.stepSize = 1, .gamma = -1}).find("invalid --gamma -1"),
            std::string::npos);
  EXPECT_NE(scheduleError("cosine", 0.1, {}).find("invalid --t-max 0"), std::string::npos);
  EXPECT_NE(scheduleError("cosine", 0.1, {.tMax = 5, .etaMin = -1}).find("invalid --eta-min -1"),
            std::string::npos);
  EXPECT_NE(scheduleError("constant", 0.1, {.warmupSteps = -3}).find("invalid --warmup-steps -3"),
            std::string::npos);
  EXPECT_NE(scheduleError("constant", -0.1, {}).find("invalid --lr -0.1"), std::string::npos);
  EXPECT_NE(scheduleError("constant", std::nan(""), {}).find("invalid --lr nan"), std::string::npos);
}
