#include "nn/Models.h"

#include "core/NameRegistry.h"

namespace dtrain::nn {

namespace {

void appendMlp(Sequential* m, Rng& rng) {
  m->append(std::make_shared<Flatten>());
  m->append(std::make_shared<Linear>(784, 256, rng));
  m->append(std::make_shared<ReLU>());
  m->append(std::make_shared<Linear>(256, 256, rng));
  m->append(std::make_shared<ReLU>());
  m->append(std::make_shared<Linear>(256, 10, rng));
}

void appendLenet(Sequential* m, Rng& rng) {
  m->append(std::make_shared<Conv2d>(1, 6, 5, rng, 1, 2));
  m->append(std::make_shared<ReLU>());
  m->append(std::make_shared<MaxPool2d>(2));
  m->append(std::make_shared<Conv2d>(6, 16, 5, rng));
  m->append(std::make_shared<ReLU>());
  m->append(std::make_shared<MaxPool2d>(2));
  m->append(std::make_shared<Flatten>());
  m->append(std::make_shared<Linear>(400, 120, rng));
  m->append(std::make_shared<ReLU>());
  m->append(std::make_shared<Linear>(120, 84, rng));
  m->append(std::make_shared<ReLU>());
  m->append(std::make_shared<Linear>(84, 10, rng));
}

// Each model's layers, appended to an empty Sequential.
const NameRegistry<void (*)(Sequential*, Rng&)>& builders() {
  static const NameRegistry<void (*)(Sequential*, Rng&)> r("model", {{"mlp", appendMlp},
                                                                    {"lenet", appendLenet}});
  return r;
}

}  // namespace

const std::vector<std::string>& modelNames() {
  static const std::vector<std::string> names = builders().names();
  return names;
}

std::shared_ptr<Sequential> makeModel(const std::string& name, uint64_t seed) {
  const auto append = builders().find(name);
  Rng rng(seed);
  auto m = std::make_shared<Sequential>();
  append(m.get(), rng);
  return m;
}

}  // namespace dtrain::nn
