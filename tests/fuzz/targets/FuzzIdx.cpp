// IDX files (--dataset idx, Fashion-MNIST), raw or gzip-compressed: magic,
// rank, dimension sizes against the bytes that follow, inflation.
#include "data/IdxFile.h"
#include "fuzz/FuzzInput.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = dtrain::fuzz::inputFile(data, size, ".idx");
  dtrain::fuzz::expectErrorsOnly([&] { dtrain::data::readIdxDims(path); });
  dtrain::fuzz::expectErrorsOnly([&] {
    dtrain::data::IdxArray a = dtrain::data::readIdx(path);
    volatile uint8_t sink = a.data.empty() ? 0 : a.data.back();
    (void)sink;
  });
  return 0;
}
