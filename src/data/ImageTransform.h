#pragma once
// A decoded image (data/ImageCodec.h) to the model's input [3, S, S] in float, as
// torchvision's transforms would make it:
//   evaluation  Resize(S) + CenterCrop(S): the centred square of side min(H, W), resampled
//   training    with --augment resized-crop: RandomResizedCrop(S) (a region of 8% to 100%
//               of the area, aspect 3/4 to 4/3, ten tries then the centre), with flip:
//               RandomHorizontalFlip (p 1/2)
//   then        ToTensor (x / 255) and Normalize(mean, std) per channel.
// Resampling is separable with a triangle filter widened by the scale when shrinking (as
// PIL's antialiased bilinear), so a downscaled image does not alias.
#include <cstdint>
#include <string>
#include <vector>

#include "core/Rng.h"
#include "data/ImageCodec.h"

namespace dtrain::data {

struct ImageOptions {
  int64_t size = 0;               // S; 0: not configured (images are refused)
  std::vector<float> mean, std;   // 3 values each (one given is repeated); empty: 0 and 1
  bool resizedCrop = false, flip = false;  // training only
};

// "--normalize 0.5,0.5" or "0.485,0.456,0.406,0.229,0.224,0.225" (the means, then the
// standard deviations); UsageError otherwise.
void parseNormalize(const std::string& spec, ImageOptions& options);

// Writes 3 x S x S floats to `out`. `rng` draws the augmentation (only when options ask).
void transformImage(const Image& image, const ImageOptions& options, Rng& rng, float* out);

}  // namespace dtrain::data
