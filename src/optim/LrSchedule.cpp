#include "optim/LrSchedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/NameRegistry.h"
#include "optim/Optimizer.h"

namespace dtrain::optim {

using dtrain::detail::concat;
using detail::checkHyper;

namespace {
void checkLr(double lr) {
  checkHyper(std::isfinite(lr) && lr >= 0, "--lr", lr, "must be a finite number >= 0");
}
void checkStep(int64_t step) {
  DTRAIN_CHECK(step >= 0, "learning-rate schedule: negative step ", step);
}
}  // namespace

ConstantSchedule::ConstantSchedule(double lr) : lr_(lr) { checkLr(lr); }
double ConstantSchedule::lrAt(int64_t step) const {
  checkStep(step);
  return lr_;
}
std::string ConstantSchedule::describe() const { return concat("constant(lr=", lr_, ")"); }

StepSchedule::StepSchedule(double lr, int64_t stepSize, double gamma)
    : lr_(lr), stepSize_(stepSize), gamma_(gamma) {
  checkLr(lr);
  checkHyper(stepSize > 0, "--step-size", static_cast<double>(stepSize), "must be > 0");
  checkHyper(std::isfinite(gamma) && gamma > 0, "--gamma", gamma, "must be a finite number > 0");
}
double StepSchedule::lrAt(int64_t step) const {
  checkStep(step);
  return lr_ * std::pow(gamma_, static_cast<double>(step / stepSize_));
}
std::string StepSchedule::describe() const {
  return concat("step(lr=", lr_, ", step_size=", stepSize_, ", gamma=", gamma_, ")");
}

CosineSchedule::CosineSchedule(double lr, int64_t tMax, double etaMin)
    : lr_(lr), tMax_(tMax), etaMin_(etaMin) {
  checkLr(lr);
  checkHyper(tMax > 0, "--t-max", static_cast<double>(tMax), "must be > 0");
  checkHyper(std::isfinite(etaMin) && etaMin >= 0, "--eta-min", etaMin,
             "must be a finite number >= 0");
}
double CosineSchedule::lrAt(int64_t step) const {
  checkStep(step);
  if (step >= tMax_) return etaMin_;
  const double t = static_cast<double>(step) / static_cast<double>(tMax_);
  return etaMin_ + (lr_ - etaMin_) * (1.0 + std::cos(std::numbers::pi * t)) / 2.0;
}
std::string CosineSchedule::describe() const {
  return concat("cosine(lr=", lr_, ", t_max=", tMax_, ", eta_min=", etaMin_, ")");
}

WarmupSchedule::WarmupSchedule(int64_t warmupSteps, std::unique_ptr<Schedule> after)
    : warmupSteps_(warmupSteps), after_(std::move(after)) {
  checkHyper(warmupSteps >= 0, "--warmup-steps", static_cast<double>(warmupSteps), "must be >= 0");
  DTRAIN_CHECK(after_ != nullptr, "WarmupSchedule: no schedule to warm up to");
}
double WarmupSchedule::lrAt(int64_t step) const {
  checkStep(step);
  if (step >= warmupSteps_) return after_->lrAt(step - warmupSteps_);
  return after_->lrAt(0) * static_cast<double>(step + 1) / static_cast<double>(warmupSteps_);
}
std::string WarmupSchedule::describe() const {
  return concat("warmup(steps=", warmupSteps_, ", then ", after_->describe(), ")");
}

namespace {
using Maker = std::unique_ptr<Schedule> (*)(double lr, const ScheduleOptions& o);

std::unique_ptr<Schedule> makeConstant(double lr, const ScheduleOptions&) {
  return std::make_unique<ConstantSchedule>(lr);
}
std::unique_ptr<Schedule> makeStep(double lr, const ScheduleOptions& o) {
  return std::make_unique<StepSchedule>(lr, o.stepSize, o.gamma);
}
std::unique_ptr<Schedule> makeCosine(double lr, const ScheduleOptions& o) {
  // tMax counts the whole run, warmup included: the decay takes the steps after the
  // warmup and reaches etaMin at step tMax (nanoGPT's get_lr, torch's
  // SequentialLR(LinearLR, CosineAnnealingLR(T_max = total - warmup))). A warmup as long
  // as the run leaves one step of decay that is never reached.
  checkHyper(o.tMax > 0, "--t-max", static_cast<double>(o.tMax), "must be > 0");
  const int64_t decaySteps = std::max<int64_t>(1, o.tMax - std::max<int64_t>(0, o.warmupSteps));
  return std::make_unique<CosineSchedule>(lr, decaySteps, o.etaMin);
}

const NameRegistry<Maker>& makers() {
  static const NameRegistry<Maker> r(
      "--schedule", {{"constant", makeConstant}, {"step", makeStep}, {"cosine", makeCosine}});
  return r;
}
}  // namespace

const std::vector<std::string>& scheduleNames() {
  static const std::vector<std::string> names = makers().names();
  return names;
}

std::unique_ptr<Schedule> makeSchedule(const std::string& name, double lr,
                                       const ScheduleOptions& o) {
  std::unique_ptr<Schedule> s = makers().find(name)(lr, o);
  checkHyper(o.warmupSteps >= 0, "--warmup-steps", static_cast<double>(o.warmupSteps),
             "must be >= 0");
  if (o.warmupSteps > 0) s = std::make_unique<WarmupSchedule>(o.warmupSteps, std::move(s));
  return s;
}

}  // namespace dtrain::optim
