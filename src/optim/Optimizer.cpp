#include "optim/Optimizer.h"

#include <cmath>

namespace dtrain::optim {

Optimizer::Optimizer(NamedParameters params, double lr) : params_(std::move(params)), lr_(lr) {
  detail::checkHyper(std::isfinite(lr) && lr >= 0, "--lr", lr, "must be a finite number >= 0");
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& [name, v] = params_[i];
    DTRAIN_CHECK(!name.empty(), "optimizer: parameter ", i, " has an empty name");
    DTRAIN_CHECK(v.defined(), "optimizer: parameter ", name, " is undefined");
    const Tensor& d = v.data();
    DTRAIN_CHECK(d.dtype() == DType::F32, "optimizer: parameter ", name, " has dtype ",
                 dtypeName(d.dtype()), "; only F32 parameters can be optimized");
    DTRAIN_CHECK(d.device().type == DeviceType::CPU, "optimizer: parameter ", name, " is on ",
                 d.device().str(), "; only CPU parameters are supported");
    DTRAIN_CHECK(d.isContiguous(), "optimizer: parameter ", name, " is not contiguous");
    // State is addressed by name, so names must be unique.
    DTRAIN_CHECK(index_.emplace(name, i).second, "optimizer: duplicate parameter name ", name);
  }
  steps_.resize(params_.size());
  slots_.resize(params_.size());
  decay_.assign(params_.size(), 1);
}

void Optimizer::setDecay2dOnly(bool on, const std::vector<int64_t>& sourceDims) {
  DTRAIN_CHECK(sourceDims.empty() || sourceDims.size() == params_.size(), "optimizer: ",
               sourceDims.size(), " source dimensions for ", params_.size(), " parameters");
  decay2dOnly_ = on;
  for (size_t i = 0; i < params_.size(); ++i) {
    const int64_t dims = sourceDims.empty() ? params_[i].second.data().dim() : sourceDims[i];
    decay_[i] = !on || dims >= 2;
  }
}

std::optional<size_t> Optimizer::indexOf(const std::string& paramName) const {
  auto it = index_.find(paramName);
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

void Optimizer::setLr(double lr) {
  detail::checkHyper(std::isfinite(lr) && lr >= 0, "--lr", lr, "must be a finite number >= 0");
  lr_ = lr;
}

void Optimizer::step() {
  if (offload_ || (sumOverRanks_ && usesTensorNorms())) {  // the ordered paths
    std::vector<size_t> all(params_.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    return step(all);
  }
  for (size_t i = 0; i < params_.size(); ++i) updateParameter(i);
  ++stepCount_;
}

void Optimizer::step(const std::vector<size_t>& which) {
  for (size_t i : which)
    DTRAIN_CHECK(i < params_.size(), "optimizer step: parameter index ", i, " out of range (",
                 params_.size(), " parameters)");
  if (sumOverRanks_ && usesTensorNorms())
    updateWithTensorNorms(which);
  else
    updateInOrder(which);
  ++stepCount_;
}

void Optimizer::setTensorGroups(std::vector<int64_t> tensorOf, int64_t tensors, NormSum sumOverRanks) {
  DTRAIN_CHECK(tensorOf.size() == params_.size(), "optimizer: ", tensorOf.size(), " tensor indices for ",
               params_.size(), " parameters");
  for (int64_t t : tensorOf) DTRAIN_CHECK(t >= 0 && t < tensors, "optimizer: tensor index ", t, " out of range");
  tensorOf_ = std::move(tensorOf);
  tensors_ = tensors;
  sumOverRanks_ = std::move(sumOverRanks);
}

void Optimizer::updateWithTensorNorms(const std::vector<size_t>& order) {
  DTRAIN_CHECK(!offload_, "optimizer: ", name(), " on slices of tensors cannot offload its state yet");
  std::vector<double> norms(2 * static_cast<size_t>(tensors_), 0.0);
  std::vector<std::pair<size_t, int64_t>> updated;  // parameter, its step
  for (size_t i : order) {
    int64_t* s = advance(i);
    if (!s) continue;
    Tensor& p = params_[i].second.data();
    accumulateNorms(p.data<float>(), params_[i].second.grad().data<float>(), p.numel(), *s, decay_[i] != 0,
                    slots_[i], &norms[2 * static_cast<size_t>(tensorOf_[i])]);
    updated.emplace_back(i, *s);
  }
  sumOverRanks_(norms);  // every rank, every step, even one without a slice
  for (const auto& [i, s] : updated) {
    Tensor& p = params_[i].second.data();
    applyWithNorms(p.data<float>(), params_[i].second.grad().data<float>(), p.numel(), s, lr_,
                   decay_[i] != 0, slots_[i], &norms[2 * static_cast<size_t>(tensorOf_[i])]);
  }
}

namespace {
// --offload: at most this much updated state waits to be written out (the
// rest of the state is on disk); the update then goes at the disk's pace.
constexpr size_t kOffloadWindow = 16 << 20;
}  // namespace

void Optimizer::updateInOrder(const std::vector<size_t>& order) {
  for (size_t k = 0; k < order.size(); ++k) {
    // The I/O thread reads the next parameter's state in while this one updates.
    if (offload_ && k + 1 < order.size()) prefetchState(order[k + 1]);
    updateParameter(order[k]);
    if (offload_) {
      evictState(order[k]);
      offload_->throttle(kOffloadWindow);
    }
  }
}

void Optimizer::prefetchState(size_t i) {
  for (const Tensor& t : slots_[i]) offload_->prefetch(t.rawData(), t.nbytes());
}

void Optimizer::evictState(size_t i) {
  for (const Tensor& t : slots_[i]) offload_->evict(t.rawData(), t.nbytes());
}

int64_t* Optimizer::advance(size_t i) {
  DTRAIN_CHECK(i < params_.size(), "optimizer: parameter index ", i, " out of range (",
               params_.size(), " parameters)");
  auto& [name, v] = params_[i];
  const Tensor& g = v.grad();
  if (!g.defined()) return nullptr;
  const Tensor& p = v.data();
  DTRAIN_CHECK(g.shape() == p.shape(), "optimizer: gradient of ", name, " has shape ",
               shapeStr(g.shape()), ", parameter has ", shapeStr(p.shape()));
  DTRAIN_CHECK(g.dtype() == DType::F32 && g.isContiguous(), "optimizer: gradient of ", name,
               " must be a contiguous F32 tensor");
  if (!steps_[i].defined()) ensureState({i});
  int64_t* s = steps_[i].data<int64_t>();
  ++*s;
  return s;
}

void Optimizer::updateParameter(size_t i) {
  const int64_t* s = advance(i);
  if (!s) return;
  autograd::Variable& v = params_[i].second;
  update(v.data().data<float>(), v.grad().data<float>(), v.data().numel(), *s, lr_, decay_[i] != 0,
         slots_[i]);
}

void Optimizer::zeroGrad() {
  for (auto& [name, v] : params_) v.zeroGrad();
}

void Optimizer::ensureState() {
  for (size_t i = 0; i < params_.size(); ++i)
    if (!steps_[i].defined()) ensureState({i});
}

void Optimizer::ensureState(const std::vector<size_t>& which) {
  memory::CategoryScope accounted(memory::Category::OptimizerState);
  for (size_t i : which) {
    DTRAIN_CHECK(i < params_.size(), "optimizer: parameter index ", i, " out of range (",
                 params_.size(), " parameters)");
    if (steps_[i].defined()) continue;
    {
      memory::OffloadScope offloaded(offload_.get());
      slots_[i] = initSlots(params_[i].second.data());
    }
    steps_[i] = Tensor::zeros({1}, DType::I64);
  }
}

void Optimizer::resetState() {
  for (auto& t : steps_) t = Tensor();
  for (auto& s : slots_) s.clear();
}

void Optimizer::resetState(const std::vector<size_t>& which) {
  for (size_t i : which) {
    steps_.at(i) = Tensor();
    slots_.at(i).clear();
  }
}

std::vector<std::string> Optimizer::checkGlobalState(const std::map<std::string, Tensor>& state) const {
  std::vector<std::string> problems;
  for (const auto& [key, t] : state)
    problems.push_back("unexpected optimizer state optimizer." + key + " (" + describe() +
                       " keeps no state of its own)");
  return problems;
}

std::vector<std::pair<std::string, Tensor*>> Optimizer::namedState() {
  std::vector<size_t> all(params_.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  return namedState(all);
}

std::vector<std::pair<std::string, Tensor*>> Optimizer::namedState(const std::vector<size_t>& which) {
  std::vector<std::pair<std::string, Tensor*>> out;
  const std::vector<std::string> names = slotNames();
  for (size_t i : which) {
    if (!steps_.at(i).defined()) continue;
    const std::string& p = params_[i].first;
    out.emplace_back(p + ".step", &steps_[i]);
    for (size_t k = 0; k < names.size(); ++k) out.emplace_back(p + "." + names[k], &slots_[i][k]);
  }
  return out;
}

int64_t Optimizer::stateBytes() const {
  int64_t n = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!steps_[i].defined()) continue;
    n += static_cast<int64_t>(steps_[i].nbytes());
    for (const Tensor& t : slots_[i]) n += static_cast<int64_t>(t.nbytes());
  }
  return n;
}

namespace detail {
bool builtWithFma() {
#ifdef __FMA__
  return true;
#else
  return false;
#endif
}

void checkHyper(bool ok, const char* flag, double value, const char* why) {
  if (!ok) throw UsageError(dtrain::detail::concat("invalid ", flag, " ", value, ": ", why));
}

void checkAdamHyper(double beta1, double beta2, double eps, double weightDecay) {
  checkHyper(beta1 >= 0 && beta1 < 1, "--beta1", beta1, "must be in [0, 1)");
  checkHyper(beta2 >= 0 && beta2 < 1, "--beta2", beta2, "must be in [0, 1)");
  checkHyper(std::isfinite(eps) && eps >= 0, "--eps", eps, "must be a finite number >= 0");
  checkHyper(std::isfinite(weightDecay) && weightDecay >= 0, "--weight-decay", weightDecay,
             "must be a finite number >= 0");
}
}  // namespace detail

}  // namespace dtrain::optim
