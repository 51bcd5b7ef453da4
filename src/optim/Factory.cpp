#include "optim/Factory.h"

#include "core/NameRegistry.h"
#include "optim/Adagrad.h"
#include "optim/Adam.h"
#include "optim/Lamb.h"
#include "optim/Lars.h"
#include "optim/Lbfgs.h"
#include "optim/Sgd.h"

namespace dtrain::optim {
namespace {

// An option set for an optimizer that ignores it is almost always a mistake in
// a command line or config, so it is reported rather than silently dropped.
template <typename T>
void rejectOption(const std::optional<T>& value, const char* flag, const std::string& name) {
  if (value)
    throw UsageError(dtrain::detail::concat("option ", flag, " does not apply to optimizer '",
                                            name, "'"));
}

using Maker = std::unique_ptr<Optimizer> (*)(const std::string& name, NamedParameters params,
                                            const OptimizerOptions& o);

std::unique_ptr<Optimizer> makeSgd(const std::string& name, NamedParameters params,
                                   const OptimizerOptions& o) {
  rejectOption(o.beta1, "--beta1", name);
  rejectOption(o.beta2, "--beta2", name);
  rejectOption(o.eps, "--eps", name);
  rejectOption(o.lrDecay, "--lr-decay", name);
  rejectOption(o.initialAccumulatorValue, "--initial-accumulator-value", name);
  SgdOptions s;
  s.lr = o.lr.value_or(s.lr);
  s.momentum = o.momentum.value_or(s.momentum);
  s.dampening = o.dampening.value_or(s.dampening);
  s.nesterov = o.nesterov.value_or(s.nesterov);
  s.weightDecay = o.weightDecay.value_or(s.weightDecay);
  return std::make_unique<Sgd>(std::move(params), s);
}

std::unique_ptr<Optimizer> makeAdamOrAdamW(const std::string& name, NamedParameters params,
                                           const OptimizerOptions& o) {
  rejectOption(o.momentum, "--momentum", name);
  rejectOption(o.dampening, "--dampening", name);
  rejectOption(o.nesterov, "--nesterov", name);
  rejectOption(o.lrDecay, "--lr-decay", name);
  rejectOption(o.initialAccumulatorValue, "--initial-accumulator-value", name);
  AdamOptions a = name == "adam" ? AdamOptions{} : AdamW::defaults();
  a.lr = o.lr.value_or(a.lr);
  a.beta1 = o.beta1.value_or(a.beta1);
  a.beta2 = o.beta2.value_or(a.beta2);
  a.eps = o.eps.value_or(a.eps);
  a.weightDecay = o.weightDecay.value_or(a.weightDecay);
  if (name == "adam") return std::make_unique<Adam>(std::move(params), a);
  return std::make_unique<AdamW>(std::move(params), a);
}

std::unique_ptr<Optimizer> makeAdagrad(const std::string& name, NamedParameters params,
                                       const OptimizerOptions& o) {
  rejectOption(o.momentum, "--momentum", name);
  rejectOption(o.dampening, "--dampening", name);
  rejectOption(o.nesterov, "--nesterov", name);
  rejectOption(o.beta1, "--beta1", name);
  rejectOption(o.beta2, "--beta2", name);
  AdagradOptions a;
  a.lr = o.lr.value_or(a.lr);
  a.lrDecay = o.lrDecay.value_or(a.lrDecay);
  a.weightDecay = o.weightDecay.value_or(a.weightDecay);
  a.initialAccumulatorValue = o.initialAccumulatorValue.value_or(a.initialAccumulatorValue);
  a.eps = o.eps.value_or(a.eps);
  return std::make_unique<Adagrad>(std::move(params), a);
}

std::unique_ptr<Optimizer> makeLarsByName(const std::string&, NamedParameters params,
                                          const OptimizerOptions& o) {
  return makeLars(std::move(params), o);
}

std::unique_ptr<Optimizer> makeLambByName(const std::string& name, NamedParameters params,
                                          const OptimizerOptions& o) {
  rejectOption(o.momentum, "--momentum", name);
  rejectOption(o.dampening, "--dampening", name);
  if (o.nesterov.value_or(false)) rejectOption(o.nesterov, "--nesterov", name);
  rejectOption(o.lrDecay, "--lr-decay", name);
  rejectOption(o.initialAccumulatorValue, "--initial-accumulator-value", name);
  LambOptions l;
  l.lr = o.lr.value_or(l.lr);
  l.beta1 = o.beta1.value_or(l.beta1);
  l.beta2 = o.beta2.value_or(l.beta2);
  l.eps = o.eps.value_or(l.eps);
  l.weightDecay = o.weightDecay.value_or(l.weightDecay);
  return std::make_unique<Lamb>(std::move(params), l);
}

std::unique_ptr<Optimizer> makeLbfgsByName(const std::string& name, NamedParameters params,
                                           const OptimizerOptions& o) {
  rejectOption(o.momentum, "--momentum", name);
  rejectOption(o.dampening, "--dampening", name);
  rejectOption(o.nesterov, "--nesterov", name);
  rejectOption(o.beta1, "--beta1", name);
  rejectOption(o.beta2, "--beta2", name);
  DTRAIN_CHECK_USAGE(!o.weightDecay || *o.weightDecay == 0,
                     "--weight-decay does not apply to --optimizer lbfgs");
  DTRAIN_CHECK_USAGE(o.offloadDir.empty(), "--offload optimizer does not apply to --optimizer lbfgs");
  LbfgsOptions l;
  l.lr = o.lr.value_or(l.lr);
  l.history = o.lbfgsHistory.value_or(l.history);
  return std::make_unique<Lbfgs>(std::move(params), l);
}

const NameRegistry<Maker>& makers() {
  static const NameRegistry<Maker> r("--optimizer", {{"sgd", makeSgd},
                                                     {"adam", makeAdamOrAdamW},
                                                     {"adamw", makeAdamOrAdamW},
                                                     {"adagrad", makeAdagrad},
                                                     {"lars", makeLarsByName},
                                                     {"lamb", makeLambByName},
                                                     {"lbfgs", makeLbfgsByName}});
  return r;
}

}  // namespace

const std::vector<std::string>& optimizerNames() {
  static const std::vector<std::string> names = makers().names();
  return names;
}

std::unique_ptr<Optimizer> makeOptimizer(const std::string& name, NamedParameters params,
                                         const OptimizerOptions& o) {
  auto opt = makers().find(name)(name, std::move(params), o);
  if (o.decay2dOnly) opt->setDecay2dOnly(*o.decay2dOnly);
  if (!o.offloadDir.empty()) opt->setOffload(std::make_shared<memory::OffloadFile>(o.offloadDir));
  return opt;
}

}  // namespace dtrain::optim
