#include "data/ImageTransform.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/Error.h"

namespace dtrain::data {
namespace {

struct Region {
  double y0, x0, height, width;  // in source pixels
};

// torchvision's RandomResizedCrop.get_params with scale (0.08, 1) and ratio (3/4, 4/3).
Region randomRegion(int64_t h, int64_t w, Rng& rng) {
  const double area = static_cast<double>(h * w);
  const double logLo = std::log(3.0 / 4.0), logHi = std::log(4.0 / 3.0);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * (0.08 + 0.92 * rng.uniform());
    const double aspect = std::exp(logLo + (logHi - logLo) * rng.uniform());
    const auto cw = static_cast<int64_t>(std::lround(std::sqrt(target * aspect)));
    const auto ch = static_cast<int64_t>(std::lround(std::sqrt(target / aspect)));
    if (cw > 0 && cw <= w && ch > 0 && ch <= h) {
      const auto y = static_cast<double>(rng.below(static_cast<uint64_t>(h - ch + 1)));
      const auto x = static_cast<double>(rng.below(static_cast<uint64_t>(w - cw + 1)));
      return {y, x, static_cast<double>(ch), static_cast<double>(cw)};
    }
  }
  double cw = static_cast<double>(w), ch = static_cast<double>(h);  // the fallback: centre
  if (cw / ch < 3.0 / 4.0) ch = std::round(cw / (3.0 / 4.0));
  else if (cw / ch > 4.0 / 3.0) cw = std::round(ch * (4.0 / 3.0));
  return {(static_cast<double>(h) - ch) / 2, (static_cast<double>(w) - cw) / 2, ch, cw};
}

Region centreSquare(int64_t h, int64_t w) {
  const auto side = static_cast<double>(std::min(h, w));
  return {(static_cast<double>(h) - side) / 2, (static_cast<double>(w) - side) / 2, side, side};
}

// The source pixels and weights of each of `outputs` samples over [start, start + length).
struct Taps {
  std::vector<int64_t> first;    // per output
  std::vector<int64_t> count;    // per output
  std::vector<float> weights;    // per output, `width` each
  int64_t width = 0;
};

Taps taps(double start, double length, int64_t outputs, int64_t sourceSize) {
  const double scale = length / static_cast<double>(outputs);
  const double support = std::max(scale, 1.0);  // the triangle's half-width in source pixels
  Taps t;
  t.width = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  t.first.resize(static_cast<size_t>(outputs));
  t.count.resize(static_cast<size_t>(outputs));
  t.weights.assign(static_cast<size_t>(outputs * t.width), 0.0f);
  for (int64_t i = 0; i < outputs; ++i) {
    const double centre = start + (static_cast<double>(i) + 0.5) * scale;
    auto lo = static_cast<int64_t>(std::floor(centre - support));
    auto hi = static_cast<int64_t>(std::ceil(centre + support));
    lo = std::max<int64_t>(lo, 0);
    hi = std::min<int64_t>(hi, sourceSize);
    hi = std::min(hi, lo + t.width);
    double sum = 0;
    float* w = &t.weights[static_cast<size_t>(i * t.width)];
    for (int64_t j = lo; j < hi; ++j) {
      const double d = std::abs((static_cast<double>(j) + 0.5 - centre) / support);
      w[j - lo] = static_cast<float>(std::max(0.0, 1.0 - d));
      sum += w[j - lo];
    }
    if (sum <= 0) {  // a region narrower than a pixel: the nearest one
      lo = std::clamp<int64_t>(static_cast<int64_t>(centre), 0, sourceSize - 1);
      hi = lo + 1;
      w[0] = 1.0f;
      sum = 1;
    }
    for (int64_t j = 0; j < hi - lo; ++j) w[j] = static_cast<float>(w[j] / sum);
    t.first[static_cast<size_t>(i)] = lo;
    t.count[static_cast<size_t>(i)] = hi - lo;
  }
  return t;
}

std::vector<float> perChannel(const std::vector<float>& v, float fallback) {
  if (v.empty()) return {fallback, fallback, fallback};
  if (v.size() == 1) return {v[0], v[0], v[0]};
  return v;
}

}  // namespace

void parseNormalize(const std::string& spec, ImageOptions& o) {
  std::vector<float> values;
  std::stringstream in(spec);
  for (std::string item; std::getline(in, item, ',');) {
    size_t used = 0;
    float v = 0;
    try {
      v = std::stof(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    DTRAIN_CHECK_USAGE(used > 0 && used == item.size() && std::isfinite(v), "--normalize '", spec,
                       "': '", item, "' is not a number (give mean,std or three means then three stds)");
    values.push_back(v);
  }
  DTRAIN_CHECK_USAGE(values.size() == 2 || values.size() == 6, "--normalize '", spec, "': ",
                     values.size(), " values; give mean,std (2) or three means then three stds (6)");
  const size_t half = values.size() / 2;
  o.mean.assign(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(half));
  o.std.assign(values.begin() + static_cast<std::ptrdiff_t>(half), values.end());
  for (float s : o.std)
    DTRAIN_CHECK_USAGE(s > 0, "--normalize '", spec, "': a standard deviation must be > 0, got ", s);
}

void transformImage(const Image& img, const ImageOptions& o, Rng& rng, float* out) {
  const int64_t s = o.size, h = img.height, w = img.width;
  DTRAIN_CHECK(s > 0 && h > 0 && w > 0, "transformImage: empty image or size");
  const Region r = o.resizedCrop ? randomRegion(h, w, rng) : centreSquare(h, w);
  const bool mirror = o.flip && (rng.next() >> 63) != 0;
  const Taps across = taps(r.x0, r.width, s, w), down = taps(r.y0, r.height, s, h);
  // Rows first: only the source rows some output row reads.
  const int64_t rowLo = down.first.front();
  const int64_t rowHi = down.first.back() + down.count.back();
  std::vector<float> rows(static_cast<size_t>((rowHi - rowLo) * s * 3));
  for (int64_t y = rowLo; y < rowHi; ++y) {
    const uint8_t* src = img.rgb.data() + y * w * 3;
    float* dst = rows.data() + (y - rowLo) * s * 3;
    for (int64_t i = 0; i < s; ++i) {
      const float* wt = &across.weights[static_cast<size_t>(i * across.width)];
      const uint8_t* p = src + across.first[static_cast<size_t>(i)] * 3;
      float a = 0, b = 0, c = 0;
      for (int64_t k = 0; k < across.count[static_cast<size_t>(i)]; ++k, p += 3) {
        a += wt[k] * p[0];
        b += wt[k] * p[1];
        c += wt[k] * p[2];
      }
      const int64_t col = mirror ? s - 1 - i : i;
      dst[col * 3] = a;
      dst[col * 3 + 1] = b;
      dst[col * 3 + 2] = c;
    }
  }
  const std::vector<float> mean = perChannel(o.mean, 0.0f), stdev = perChannel(o.std, 1.0f);
  float scale[3], shift[3];  // (x / 255 - mean) / std as one multiply-add
  for (int ch = 0; ch < 3; ++ch) {
    scale[ch] = 1.0f / (255.0f * stdev[static_cast<size_t>(ch)]);
    shift[ch] = -mean[static_cast<size_t>(ch)] / stdev[static_cast<size_t>(ch)];
  }
  const int64_t plane = s * s;
  for (int64_t j = 0; j < s; ++j) {
    const float* wt = &down.weights[static_cast<size_t>(j * down.width)];
    const int64_t first = down.first[static_cast<size_t>(j)] - rowLo;
    for (int64_t i = 0; i < s; ++i) {
      float acc[3] = {0, 0, 0};
      for (int64_t k = 0; k < down.count[static_cast<size_t>(j)]; ++k) {
        const float* p = rows.data() + ((first + k) * s + i) * 3;
        acc[0] += wt[k] * p[0];
        acc[1] += wt[k] * p[1];
        acc[2] += wt[k] * p[2];
      }
      for (int ch = 0; ch < 3; ++ch)
        out[ch * plane + j * s + i] = std::clamp(acc[ch], 0.0f, 255.0f) * scale[ch] + shift[ch];
    }
  }
}

}  // namespace dtrain::data
