#pragma once
// The CIFAR ResNets of He et al. 2016 (section 4.2), as
// /work/shared/bench/torch_resnet.py builds them: a 3x3 stem conv (16) + BN +
// ReLU, three stages of n basic blocks (16, 32, 64 channels; the first block
// of stages 2 and 3 halves the resolution), global average pooling and a
// Linear classifier; depth = 6n + 2 (resnet-20: n = 3, resnet-32: 5,
// resnet-56: 9). A block is conv3x3-BN-ReLU-conv3x3-BN, plus the shortcut
// (identity, or a 1x1 strided conv + BN, "downsample", where the shape
// changes), then ReLU. Convolutions have no bias. Names are torchvision's:
//   conv1.weight, bn1.{weight,bias,running_mean,running_var,num_batches_tracked},
//   layer<s>.<b>.conv1.weight, layer<s>.<b>.bn1.*, ..., layer2.0.downsample.0.weight,
//   layer2.0.downsample.1.*, fc.weight, fc.bias
// so a checkpoint loads into torch_resnet.py's model with strict=True and back.
// Init as torch_resnet.py: convs kaiming_normal_(fan_out, relu), BN (1, 0),
// fc torch's default.
#include <memory>
#include <string>
#include <vector>

#include "nn/Layers.h"
#include "nn/ModelRegistry.h"

namespace dtrain::nn {

class BasicBlock : public Module {
 public:
  BasicBlock(int64_t in, int64_t out, int64_t stride, Rng& rng);
  Variable forward(const Variable& x) override;
  std::string describe() const override { return "BasicBlock"; }
  std::shared_ptr<Conv2d> conv1, conv2;
  std::shared_ptr<BatchNorm2d> bn1, bn2;
  std::shared_ptr<Sequential> downsample;  // null: identity shortcut
  std::shared_ptr<Conv2d> projection;      // downsample's convolution
  void setActivationFormat(MemoryFormat f);
};

class ResNet : public Module {
 public:
  // `blocksPerStage` = n; images of `channels` channels, `classes` outputs.
  ResNet(int64_t blocksPerStage, int64_t channels, int64_t classes, Rng& rng);
  Variable forward(const Variable& x) override;
  std::string describe() const override { return "ResNet"; }
  std::shared_ptr<Conv2d> conv1;
  std::shared_ptr<BatchNorm2d> bn1;
  std::shared_ptr<Sequential> layer1, layer2, layer3;
  std::shared_ptr<Linear> fc;
  // ChannelBlocked (the default): the activations stay in oneDNN's blocked
  // layout from the stem convolution to the pooling (BatchNorm, its ReLU, the
  // residual add and the pooling read it), reordered only at those two edges.
  // Plain: every layer in NCHW (the same network; sums in another order).
  void setActivationFormat(MemoryFormat f);
};

// "resnet-20", "resnet-32", "resnet-56".
const std::vector<std::string>& resnetNames();
// Throws UsageError for an unknown name or samples that are not C x H x W images.
std::shared_ptr<Module> makeResNet(const std::string& name, uint64_t seed, const DataShape& data = {});

}  // namespace dtrain::nn
