#pragma once
// The safetensors file format (https://github.com/huggingface/safetensors):
//   u64 little-endian N | N bytes of JSON header, space-padded to a multiple of 8 |
//   raw little-endian tensor data.
// The header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]}
// (offsets relative to the data section) and may hold "__metadata__", a
// string-to-string map. Files written here load with the safetensors Python
// package and with scripts/torch_interop.py.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tensor/Tensor.h"

namespace dtrain::runtime {

struct SafetensorsFile {
  // In data-section order (the order they were written in).
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::map<std::string, std::string> metadata;

  // nullptr when absent.
  const Tensor* find(const std::string& name) const;
};

// Writes `tensors` (any strides; CPU; F32, F16, BF16, I32, I64 or U8) and
// `metadata` to `path` atomically: the bytes go to path + ".tmp", are fsynced,
// and the file is renamed over `path`, so an error or crash never leaves a
// partial file at `path`. Tensors are laid out by decreasing element size
// (stable otherwise), as the reference implementation does, so every tensor
// is naturally aligned in a mapped file. Throws dtrain::Error naming the file.
void saveSafetensors(const std::string& path,
                     const std::vector<std::pair<std::string, Tensor>>& tensors,
                     const std::map<std::string, std::string>& metadata = {});

// Reads and validates a whole file; throws dtrain::Error naming the file and
// the problem (too short, header length beyond the file, bad JSON, unknown
// dtype, bad shape, offsets out of range, overlapping or not matching the
// shape and dtype).
SafetensorsFile loadSafetensors(const std::string& path);

}  // namespace dtrain::runtime
