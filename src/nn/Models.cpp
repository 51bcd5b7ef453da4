#include "nn/Models.h"

namespace dtrain::nn {

const std::vector<std::string>& modelNames() {
  static const std::vector<std::string> names{"mlp", "lenet"};
  return names;
}

std::shared_ptr<Sequential> makeModel(const std::string& name, uint64_t seed,
                                      const DataShape& data, const std::vector<int64_t>& mlpHidden) {
  DTRAIN_CHECK_USAGE(data.classes >= 1 && shapeNumel(data.sample) >= 1, "--model ", name,
                     ": nothing to classify (samples of shape ", shapeStr(data.sample), ", ",
                     data.classes, " classes)");
  Rng rng(seed);
  auto m = std::make_shared<Sequential>();
  if (name == "mlp") {
    const std::vector<int64_t> hidden = mlpHidden.empty() ? std::vector<int64_t>{256, 256} : mlpHidden;
    m->append(std::make_shared<Flatten>());
    int64_t width = shapeNumel(data.sample);
    for (int64_t h : hidden) {
      DTRAIN_CHECK_USAGE(h >= 1, "--mlp-hidden: widths must be positive (got ", h, ")");
      m->append(std::make_shared<Linear>(width, h, rng));
      m->append(std::make_shared<ReLU>());
      width = h;
    }
    m->append(std::make_shared<Linear>(width, data.classes, rng));
  } else if (name == "lenet") {
    // Colour images too (--dataset imagefolder decodes to 3 channels).
    DTRAIN_CHECK_USAGE(data.sample.size() == 3 && (data.sample[0] == 1 || data.sample[0] == 3) &&
                           data.sample[1] == 28 && data.sample[2] == 28,
                       "--model lenet takes 1x28x28 or 3x28x28 images; "
                       "the data's samples have shape ",
                       shapeStr(data.sample), " (--model mlp takes any shape)");
    m->append(std::make_shared<Conv2d>(data.sample[0], 6, 5, rng, 1, 2));
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
