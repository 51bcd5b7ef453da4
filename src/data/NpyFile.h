#pragma once
// Reader (and, for tests and tools, writer) of NumPy's .npy format
// (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html):
// the magic "\x93NUMPY", a version byte pair (1.0, 2.0 or 3.0), the length of
// the header (u16 for 1.0, u32 for 2.0 and 3.0, little-endian), a Python dict
// literal {'descr': '<f4', 'fortran_order': False, 'shape': (N, ...), } and the
// array's bytes.
//
// dtrain reads C-order, little-endian arrays: features float32 (<f4), float64
// (<f8) or uint8 (|u1); labels int64 (<i8), int32 (<i4) or uint8 (|u1).
// Every problem with a file (missing, bad magic, unsupported version or dtype,
// Fortran order, big-endian, wrong rank, truncated or trailing data, labels out
// of range) throws UsageError: one line that starts with `name` (e.g.
// "--train-data x.npy") and says what is wrong.
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/Tensor.h"

namespace dtrain::data {

// Class labels are < this (a model with more outputs is not a classifier we train).
inline constexpr int64_t kMaxClasses = int64_t{1} << 16;

struct NpyHeader {
  int major = 1, minor = 0;
  std::string descr;  // e.g. "<f4"
  bool fortranOrder = false;
  std::vector<int64_t> shape;  // () for a scalar
  int64_t dataOffset = 0;      // where the array's bytes start
  int64_t itemSize = 0;        // bytes per element (0: a dtype dtrain does not read)

  int64_t numel() const;
};

// The header of `path`; `name` starts every error message ("" : "file <path>").
NpyHeader readNpyHeader(const std::string& path, const std::string& name = "");

// Features as an F32 tensor [N, ...] (an array [N] gives samples of shape [1]).
// float32 and float64 keep their values; uint8 is scaled to x / 255 as the
// IDX loader scales pixels (data/FashionMnist.h).
Tensor readNpyFeatures(const std::string& path, const std::string& name = "");

// Labels of an array [N] of int64, int32 or uint8, as class indices in
// [0, kMaxClasses); a negative or larger label is a UsageError naming the sample.
std::vector<int32_t> readNpyLabels(const std::string& path, const std::string& name = "");

// A .npy held in memory (a shard member, data/ShardReader.h) of `totalSize` bytes, of
// which `bytes` holds at least the header: its header, checked as a features array (dtype,
// C order, data size = totalSize - header). Errors are UsageError starting with `who`.
NpyHeader parseNpyFeaturesHeader(const uint8_t* bytes, size_t size, int64_t totalSize,
                                 const std::string& who);
// Its numel() elements after the header as floats (uint8 scaled to x / 255).
void npyFeaturesToFloats(const NpyHeader& h, const uint8_t* bytes, float* out);

// Writes `data` (product(shape) elements of `descr`, e.g. "<f4", raw bytes) as
// a .npy file of format version `major`.0; tests and tools only. Any descr and
// fortranOrder are written as given, so tests can write files dtrain refuses.
void writeNpy(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape,
              const void* data, size_t bytes, int major = 1, bool fortranOrder = false);

}  // namespace dtrain::data
