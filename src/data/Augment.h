#pragma once
// Training-set augmentation on the loader (--augment crop,flip), for image
// classification: samples [C, H, W].
//   crop  pad each side with `padding` zeros, take a random H x W window
//         (offsets 0..2*padding in each direction), as CIFAR's RandomCrop(32, 4)
//   flip  mirror left-right with probability 1/2
//   resized-crop  images decoded by the loader (--dataset imagefolder, image shards):
//         torchvision's RandomResizedCrop at decoding (data/ImageTransform.h); their flip
//         is made there too
// The random choices of a sample are a pure function of (seed, epoch, step,
// position in the global batch), so the global-batch rule holds: the samples
// of step t get the same augmentation whatever the number of workers (a rank's
// slice starts at position rank * local batch), and a resumed run draws what
// an uninterrupted one would.
#include <cstdint>
#include <string>

#include "tensor/Tensor.h"

namespace dtrain::data {

struct AugmentOptions {
  bool crop = false;
  bool flip = false;
  bool resizedCrop = false;  // made by the image decoder, not augmentSamples
  int64_t padding = 4;
  uint64_t seed = 0;
  bool any() const { return crop || flip; }
};

// "", "none", or a list of crop, flip, resized-crop (any order); UsageError naming
// --augment and the choices otherwise.
AugmentOptions parseAugment(const std::string& spec);

// Throws UsageError unless `sampleShape` is an image [C, H, W] (and for resized-crop,
// which only decoded images take).
void checkAugmentable(const AugmentOptions& options, const Shape& sampleShape);

// Augments `count` samples of `sampleShape` in place in x (contiguous), the
// first at `firstPosition` of step `step`'s global batch in epoch `epoch`.
void augmentSamples(const AugmentOptions& options, const Shape& sampleShape, float* x,
                    int64_t count, int64_t epoch, int64_t step, int64_t firstPosition);

}  // namespace dtrain::data
