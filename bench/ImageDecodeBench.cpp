// Images decoded and transformed per second on one thread (what one loader thread of
// --dataset imagefolder does per sample): read the file, decode (libjpeg-turbo / libpng),
// RandomResizedCrop + flip to S x S, normalise. bench/image_loader.py runs it against
// torchvision's transforms on the same files, alternating.
//   image_decode_bench SIZE ROUNDS FILE...   prints one JSON line per round
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "data/ImageCodec.h"
#include "data/ImageTransform.h"

using namespace dtrain;
using namespace dtrain::data;

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: image_decode_bench SIZE ROUNDS FILE...\n");
    return 2;
  }
  ImageOptions o;
  o.size = std::stoll(argv[1]);
  o.resizedCrop = o.flip = true;
  o.mean = {0.485f, 0.456f, 0.406f};
  o.std = {0.229f, 0.224f, 0.225f};
  const int rounds = std::stoi(argv[2]);
  std::vector<float> out(static_cast<size_t>(3 * o.size * o.size));
  Rng rng(1);
  for (int r = 0; r < rounds; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 3; i < argc; ++i) {
      std::ifstream in(argv[i], std::ios::binary);
      const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
      transformImage(decodeImage(bytes.data(), bytes.size()), o, rng, out.data());
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("{\"images\": %d, \"seconds\": %.6f, \"images_per_s\": %.1f}\n", argc - 3, s, (argc - 3) / s);
  }
  return 0;
}
