#pragma once
// Reader for the IDX format of MNIST-style data sets (http://yann.lecun.com/exdb/mnist/):
// a big-endian magic 0x0000TTDD (TT = element type, DD = number of dimensions), DD
// big-endian u32 sizes, then the elements in row-major order. Files may be gzip
// compressed (detected by the gzip magic 1f 8b, not by the file name).
//
// Every problem with a file (missing, bad magic, unsupported type, wrong rank, truncated
// or trailing data, corrupt gzip stream) throws UsageError naming the file and the
// problem: a bad file is the user's input (exit code 2); a read error is dtrain::Error.
#include <cstdint>
#include <string>
#include <vector>

namespace dtrain::data {

// IDX element type codes (the third byte of the magic).
inline constexpr uint8_t kIdxUByte = 0x08;

struct IdxArray {
  std::vector<int64_t> dims;  // e.g. {60000, 28, 28}
  std::vector<uint8_t> data;  // product(dims) bytes, row-major

  int64_t count() const { return dims.empty() ? 0 : dims[0]; }
  int64_t numel() const { return static_cast<int64_t>(data.size()); }
};

// Reads an IDX file of unsigned bytes (type 0x08). expectedDims >= 1 also checks the
// rank: 1 for labels (magic 0x00000801), 3 for images (magic 0x00000803); -1 accepts any.
IdxArray readIdx(const std::string& path, int expectedDims = -1);

// Only the dimension sizes of an IDX file (e.g. {60000, 28, 28}), from its header:
// what a model is built for, without reading the data.
std::vector<int64_t> readIdxDims(const std::string& path, int expectedDims = -1);

// The whole file's bytes, inflated when it starts with the gzip magic.
std::vector<uint8_t> readMaybeGzip(const std::string& path);

// Writes a (raw or gzip compressed) IDX u8 file; used by tests and tools.
void writeIdx(const std::string& path, const std::vector<int64_t>& dims,
              const std::vector<uint8_t>& data, bool gzip);

}  // namespace dtrain::data
