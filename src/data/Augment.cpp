#include "data/Augment.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/Error.h"
#include "core/Rng.h"

namespace dtrain::data {

AugmentOptions parseAugment(const std::string& spec) {
  AugmentOptions o;
  if (spec.empty() || spec == "none") return o;
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = std::min(spec.find(',', start), spec.size());
    const std::string name = spec.substr(start, comma - start);
    if (name == "crop")
      o.crop = true;
    else if (name == "flip")
      o.flip = true;
    else if (name == "resized-crop")
      o.resizedCrop = true;
    else
      throw UsageError(dtrain::detail::concat("unknown --augment '", name,
                                              "' (known: crop, flip, crop,flip, resized-crop, none)"));
    start = comma + 1;
  }
  return o;
}

void checkAugmentable(const AugmentOptions& o, const Shape& s) {
  DTRAIN_CHECK_USAGE(!o.resizedCrop, "--augment resized-crop applies to images the loader "
                     "decodes (--dataset imagefolder, shards of .jpg/.png)");
  if (!o.any()) return;
  DTRAIN_CHECK_USAGE(s.size() == 3, "--augment needs image samples [C, H, W]; this data set's are ",
                     shapeStr(s));
}

namespace {
// One generator per sample from its coordinates (splitmix64-style mixing, so
// neighbouring positions and steps get unrelated streams).
uint64_t mixAugmentKey(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
  return h ^ (h >> 31);
}
}  // namespace

void augmentSamples(const AugmentOptions& o, const Shape& s, float* x, int64_t count,
                    int64_t epoch, int64_t step, int64_t firstPosition) {
  if (!o.any() || count == 0) return;
  DTRAIN_CHECK(s.size() == 3, "augmentSamples: sample shape ", shapeStr(s), " is not [C, H, W]");
  const int64_t c = s[0], h = s[1], w = s[2], plane = h * w, numel = c * plane;
  std::vector<float> src(static_cast<size_t>(numel));
  for (int64_t i = 0; i < count; ++i) {
    uint64_t key = mixAugmentKey(o.seed, 0x6175676d656e74ULL);  // "augment"
    key = mixAugmentKey(key, static_cast<uint64_t>(epoch));
    key = mixAugmentKey(key, static_cast<uint64_t>(step));
    key = mixAugmentKey(key, static_cast<uint64_t>(firstPosition + i));
    Rng rng(key);
    // Both draws always happen, so crop's offsets do not depend on --augment flip.
    const int64_t span = 2 * o.padding + 1;
    const int64_t dy = static_cast<int64_t>(rng.below(static_cast<uint64_t>(span))) - o.padding;
    const int64_t dx = static_cast<int64_t>(rng.below(static_cast<uint64_t>(span))) - o.padding;
    const bool mirror = (rng.next() >> 63) != 0;
    float* sample = x + i * numel;
    std::memcpy(src.data(), sample, static_cast<size_t>(numel) * sizeof(float));
    const int64_t oy = o.crop ? dy : 0, ox = o.crop ? dx : 0;
    const bool flip = o.flip && mirror;
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t yy = 0; yy < h; ++yy) {
        const int64_t sy = yy + oy;  // the padded image's row, unpadded coordinates
        float* out = sample + ch * plane + yy * w;
        if (sy < 0 || sy >= h) {
          std::fill(out, out + w, 0.0f);
          continue;
        }
        const float* row = src.data() + ch * plane + sy * w;
        for (int64_t xx = 0; xx < w; ++xx) {
          const int64_t cx = flip ? w - 1 - xx : xx;  // flip the cropped window
          const int64_t sx = cx + ox;
          out[xx] = sx >= 0 && sx < w ? row[sx] : 0.0f;
        }
      }
  }
}

}  // namespace dtrain::data
