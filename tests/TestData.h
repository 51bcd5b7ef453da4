#pragma once
// Deterministic test inputs shared by several test targets.
#include <cstdint>
#include <filesystem>
#include <string>

#include "core/Rng.h"
#include "data/FashionMnist.h"
#include "tensor/Tensor.h"

namespace dtrain::test {

// Standard normal values (times `scale`) from a seed.
inline Tensor randn(const Shape& s, uint64_t seed, float scale = 1.f) {
  Rng r(seed);
  Tensor t = Tensor::empty(s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = r.normal() * scale;
  return t;
}

// Deterministic pseudo-English of `bytes` bytes: a few words in random order,
// with line breaks (text for language-model tests; not a corpus to learn).
inline std::string sampleText(size_t bytes, uint64_t seed = 777) {
  static const char* kWords[] = {"and", "the", "lord", "said", "unto", "him", "light",
                                 "was", "good", "earth", "heaven", "waters", "day", "night"};
  uint64_t x = seed;
  std::string s;
  while (s.size() < bytes) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    s += kWords[(x >> 33) % 14];
    s += (x >> 20) % 9 == 0 ? ".\n" : " ";
  }
  return s;
}

// Whether Debian's dataset-fashion-mnist is installed (tests that read it skip otherwise).
inline bool haveFashionMnist() {
  return std::filesystem::exists(std::string(data::kFashionMnistDir) + "/train-images-idx3-ubyte.gz");
}

}  // namespace dtrain::test
