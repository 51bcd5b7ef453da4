#include "nn/Module.h"

#include <sstream>

#include "autograd/Recompute.h"

namespace dtrain::nn {

Variable Module::operator()(const Variable& x) {
  auto run = [this](const Variable& in) {
    if (!recompute_) return forward(in);
    return autograd::recompute([this](const Variable& i) { return forward(i); }, in);
  };
  return wrapper_ ? wrapper_(x, run) : run(x);
}

Variable Module::registerParameter(const std::string& name, Tensor value) {
  Variable v(std::move(value), true);
  v.setName(name);
  params_.emplace_back(name, v);
  return v;
}

Tensor& Module::registerBuffer(const std::string& name, Tensor value) {
  buffers_.emplace_back(name, std::make_unique<Tensor>(std::move(value)));
  return *buffers_.back().second;
}

void Module::registerModule(const std::string& name, std::shared_ptr<Module> child) {
  children_.emplace_back(name, std::move(child));
}

void Module::collectParameters(const std::string& prefix,
                               std::vector<std::pair<std::string, Variable>>& out) const {
  for (const auto& [n, v] : params_) out.emplace_back(prefix + n, v);
  for (const auto& [n, c] : children_) c->collectParameters(prefix + n + ".", out);
}

void Module::collectBuffers(const std::string& prefix,
                            std::vector<std::pair<std::string, Tensor*>>& out) {
  for (auto& [n, t] : buffers_) out.emplace_back(prefix + n, t.get());
  for (auto& [n, c] : children_) c->collectBuffers(prefix + n + ".", out);
}

std::vector<std::pair<std::string, Variable>> Module::namedParameters() const {
  std::vector<std::pair<std::string, Variable>> out;
  collectParameters("", out);
  return out;
}

std::vector<Variable> Module::parameters() const {
  std::vector<Variable> out;
  for (auto& [n, v] : namedParameters()) out.push_back(v);
  return out;
}

std::vector<std::pair<std::string, Tensor*>> Module::namedBuffers() {
  std::vector<std::pair<std::string, Tensor*>> out;
  collectBuffers("", out);
  return out;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
}

void Module::zeroGrad() {
  for (auto& v : parameters())
    if (v.requiresGrad()) v.zeroGrad();  // frozen ones (LoRA's base) get no gradient buffer
}

int64_t Module::parameterCount() const {
  int64_t n = 0;
  for (auto& v : parameters()) n += v.numel();
  return n;
}

std::string Module::summary(int indent) const {
  std::ostringstream os;
  os << describe();
  if (!children_.empty()) {
    os << " (\n";
    for (const auto& [n, c] : children_)
      os << std::string(indent + 2, ' ') << "(" << n << "): " << c->summary(indent + 2) << "\n";
    os << std::string(indent, ' ') << ")";
  }
  return os.str();
}

}  // namespace dtrain::nn
