#include "nn/Models.h"

namespace dtrain::nn {

const std::vector<std::string>& modelNames() {
  static const std::vector<std::string> names{"mlp", "lenet"};
  return names;
}

std::shared_ptr<Sequential> makeModel(const std::string& name, uint64_t seed,
                                      const DataShape& data) {
  DTRAIN_CHECK_USAGE(data.classes >= 1 && shapeNumel(data.sample) >= 1, "--model ", name,
                     ": nothing to classify (samples of shape ", shapeStr(data.sample), ", ",
                     data.classes, " classes)");
  Rng rng(seed);
  auto m = std::make_shared<Sequential>();
  if (name == "mlp") {
    m->append(std::make_shared<Flatten>());
    m->append(std::make_shared<Linear>(shapeNumel(data.sample), 256, rng));
    m->append(std::make_shared<ReLU>());
    m->append(std::make_shared<Linear>(256, 256, rng));
    m->append(std::make_shared<ReLU>());
    m->append(std::make_shared<Linear>(256, data.classes, rng));
  } else if (name == "lenet") {
    DTRAIN_CHECK_USAGE(data.sample == Shape({1, 28, 28}),
                       "--model lenet takes 1x28x28 images; "
                       "the data's samples have shape ",
                       shapeStr(data.sample), " (--model mlp takes any shape)");
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
    m->append(std::make_shared<Linear>(84, data.classes, rng));
  } else {
    throw UsageError("unknown model '" + name + "' (known: mlp, lenet)");
  }
  return m;
}

}  // namespace dtrain::nn
