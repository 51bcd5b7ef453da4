#pragma once
// Learning-rate schedules as pure functions of the step: lrAt(step) is the
// learning rate for the update that follows `step` completed updates (0 for the
// first). Being stateless, a resumed run needs only the step count.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dtrain::optim {

class Schedule {
 public:
  virtual ~Schedule() = default;
  virtual double lrAt(int64_t step) const = 0;
  // e.g. "cosine(lr=0.1, t_max=1000, eta_min=0)".
  virtual std::string describe() const = 0;
};

class ConstantSchedule : public Schedule {
 public:
  explicit ConstantSchedule(double lr);
  double lrAt(int64_t step) const override;
  std::string describe() const override;

 private:
  double lr_;
};

// torch StepLR: lr * gamma^floor(step / stepSize).
class StepSchedule : public Schedule {
 public:
  StepSchedule(double lr, int64_t stepSize, double gamma);
  double lrAt(int64_t step) const override;
  std::string describe() const override;

 private:
  double lr_;
  int64_t stepSize_;
  double gamma_;
};

// torch CosineAnnealingLR (closed form): etaMin + (lr - etaMin) * (1 + cos(pi * step / tMax)) / 2
// for step <= tMax, then etaMin (torch's closed form would rise again after tMax,
// which no training run wants).
class CosineSchedule : public Schedule {
 public:
  CosineSchedule(double lr, int64_t tMax, double etaMin);
  double lrAt(int64_t step) const override;
  std::string describe() const override;

 private:
  double lr_;
  int64_t tMax_;
  double etaMin_;
};

// Linear warmup over `warmupSteps` steps to the wrapped schedule's first value
// (lr * (step + 1) / warmupSteps, so no update is wasted at lr 0), then the
// wrapped schedule shifted by warmupSteps (like torch SequentialLR). makeSchedule
// shortens a cosine's span by the warmup so that it still ends at tMax; a step
// schedule keeps its period, counted from the end of the warmup.
class WarmupSchedule : public Schedule {
 public:
  WarmupSchedule(int64_t warmupSteps, std::unique_ptr<Schedule> after);
  double lrAt(int64_t step) const override;
  std::string describe() const override;

 private:
  int64_t warmupSteps_;
  std::unique_ptr<Schedule> after_;
};

struct ScheduleOptions {
  int64_t stepSize = 0;     // step: required (> 0)
  double gamma = 0.1;       // step
  // cosine: required (> 0), the step at which the lr reaches etaMin, warmup included (the
  // trainer passes the total step count): the decay runs over tMax - warmupSteps steps.
  int64_t tMax = 0;
  double etaMin = 0.0;      // cosine
  int64_t warmupSteps = 0;  // any schedule: > 0 wraps it in a WarmupSchedule
};

// "constant", "step", "cosine".
const std::vector<std::string>& scheduleNames();

// Throws dtrain::UsageError naming the flag on an unknown name or invalid values.
std::unique_ptr<Schedule> makeSchedule(const std::string& name, double lr,
                                       const ScheduleOptions& options = {});

}  // namespace dtrain::optim
