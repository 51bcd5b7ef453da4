#include "nn/ResNet.h"

#include <cmath>

#include "core/Error.h"
#include "nn/Init.h"

namespace dtrain::nn {

namespace {

// kaiming_normal_(mode="fan_out", nonlinearity="relu"): N(0, 2 / (out * k * k)).
std::shared_ptr<Conv2d> resnetConv(int64_t in, int64_t out, int64_t kernel, int64_t stride, Rng& rng) {
  auto c = std::make_shared<Conv2d>(in, out, kernel, rng, stride, kernel / 2, false);
  init::normal(c->weight.data(), 0.f, std::sqrt(2.f / static_cast<float>(out * kernel * kernel)), rng);
  return c;
}

}  // namespace

BasicBlock::BasicBlock(int64_t in, int64_t out, int64_t stride, Rng& rng) {
  conv1 = resnetConv(in, out, 3, stride, rng);
  bn1 = std::make_shared<BatchNorm2d>(out);
  conv2 = resnetConv(out, out, 3, 1, rng);
  bn2 = std::make_shared<BatchNorm2d>(out);
  registerModule("conv1", conv1);
  registerModule("bn1", bn1);
  registerModule("conv2", conv2);
  registerModule("bn2", bn2);
  if (stride != 1 || in != out) {
    downsample = std::make_shared<Sequential>();
    projection = resnetConv(in, out, 1, stride, rng);
    downsample->append(projection);
    downsample->append(std::make_shared<BatchNorm2d>(out));
    registerModule("downsample", downsample);
  }
}

void BasicBlock::setActivationFormat(MemoryFormat f) {
  conv1->output = conv2->output = f;
  if (projection) projection->output = f;
}

Variable BasicBlock::forward(const Variable& x) {
  Variable h = bn1->forwardRelu((*conv1)(x));
  Variable shortcut = downsample ? (*downsample)(x) : x;
  // bn2, the shortcut added, then ReLU: one fused pass (BatchNorm2d::forwardAddRelu).
  return bn2->forwardAddRelu((*conv2)(h), shortcut);
}

ResNet::ResNet(int64_t n, int64_t channels, int64_t classes, Rng& rng) {
  conv1 = resnetConv(channels, 16, 3, 1, rng);
  bn1 = std::make_shared<BatchNorm2d>(16);
  registerModule("conv1", conv1);
  registerModule("bn1", bn1);
  int64_t in = 16;
  auto stage = [&](int64_t out, int64_t stride) {
    auto s = std::make_shared<Sequential>();
    for (int64_t b = 0; b < n; ++b) {
      s->append(std::make_shared<BasicBlock>(in, out, b == 0 ? stride : 1, rng));
      in = out;
    }
    return s;
  };
  layer1 = stage(16, 1);
  layer2 = stage(32, 2);
  layer3 = stage(64, 2);
  registerModule("layer1", layer1);
  registerModule("layer2", layer2);
  registerModule("layer3", layer3);
  fc = std::make_shared<Linear>(64, classes, rng);
  registerModule("fc", fc);
  setActivationFormat(MemoryFormat::ChannelBlocked);
}

void ResNet::setActivationFormat(MemoryFormat f) {
  conv1->output = f;
  for (const auto& stage : {layer1, layer2, layer3})
    for (const auto& [name, block] : stage->children())
      std::static_pointer_cast<BasicBlock>(block)->setActivationFormat(f);
}

Variable ResNet::forward(const Variable& x) {
  Variable h = bn1->forwardRelu((*conv1)(x));
  h = (*layer3)((*layer2)((*layer1)(h)));
  return (*fc)(autograd::globalAvgPool2d(h));
}

const std::vector<std::string>& resnetNames() {
  static const std::vector<std::string> names{"resnet-20", "resnet-32", "resnet-56"};
  return names;
}

std::shared_ptr<Module> makeResNet(const std::string& name, uint64_t seed, const DataShape& data) {
  int64_t depth = 0;
  if (name == "resnet-20") depth = 20;
  else if (name == "resnet-32") depth = 32;
  else if (name == "resnet-56") depth = 56;
  else throw UsageError("unknown model '" + name + "' (known ResNets: resnet-20, resnet-32, resnet-56)");
  DTRAIN_CHECK_USAGE(data.sample.size() == 3 && data.sample[1] >= 4 && data.sample[2] >= 4,
                     "--model ", name, " takes C x H x W images (at least 4 x 4); the data's samples "
                     "have shape ", shapeStr(data.sample), " (--model mlp takes any shape)");
  DTRAIN_CHECK_USAGE(data.classes >= 1, "--model ", name, ": nothing to classify (", data.classes,
                     " classes)");
  Rng rng(seed);
  return std::make_shared<ResNet>((depth - 2) / 6, data.sample[0], data.classes, rng);
}

}  // namespace dtrain::nn
