#pragma once
// Shards written by the tests: sample i's features are [1, 2, 2] float32 filled with i
// (so a sample names itself), its label i % classes, its key "%06d" of i.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "data/NpyFile.h"
#include "data/TarFile.h"

namespace dtrain::data::test {

// The bytes of a .npy file holding `data` of `shape` (float32).
inline std::vector<uint8_t> npyBytes(const std::string& scratch, const std::vector<int64_t>& shape,
                                     const std::vector<float>& data) {
  writeNpy(scratch, "<f4", shape, data.data(), data.size() * sizeof(float));
  std::ifstream f(scratch, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

inline void addSample(TarWriter& tar, const std::string& scratch, int64_t id, int classes,
                      int64_t floatsPerSample = 4) {
  char key[16];
  std::snprintf(key, sizeof key, "%06lld", static_cast<long long>(id));
  const std::vector<float> x(static_cast<size_t>(floatsPerSample), static_cast<float>(id));
  const auto npy = npyBytes(scratch, floatsPerSample == 4 ? std::vector<int64_t>{1, 2, 2}
                                                          : std::vector<int64_t>{floatsPerSample},
                            x);
  tar.add(std::string(key) + ".npy", npy.data(), npy.size());
  const std::string label = std::to_string(id % classes);
  tar.add(std::string(key) + ".cls", label.data(), label.size());
}

// `counts[s]` samples in shard s, numbered on from shard to shard; returns the paths.
inline std::vector<std::string> writeShardSet(const std::string& dir,
                                              const std::vector<int64_t>& counts,
                                              int classes = 10, int64_t floatsPerSample = 4) {
  std::vector<std::string> paths;
  int64_t id = 0;
  for (size_t s = 0; s < counts.size(); ++s) {
    char name[32];
    std::snprintf(name, sizeof name, "/train-%04zu.tar", s);
    paths.push_back(dir + name);
    TarWriter tar(paths.back());
    for (int64_t i = 0; i < counts[s]; ++i) addSample(tar, dir + "/scratch.npy", id++, classes, floatsPerSample);
    tar.close();
  }
  return paths;
}

}  // namespace dtrain::data::test
