// .npy files (--dataset npy): the magic, the version, the header's Python
// dict literal (descr, fortran_order, shape) and the data's size.
#include "data/NpyFile.h"
#include "fuzz/FuzzInput.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = dtrain::fuzz::inputFile(data, size, ".npy");
  dtrain::fuzz::expectErrorsOnly([&] {
    dtrain::Tensor t = dtrain::data::readNpyFeatures(path);
    volatile uint8_t sink =
        t.nbytes() ? static_cast<const uint8_t*>(t.rawData())[t.nbytes() - 1] : 0;
    (void)sink;
  });
  dtrain::fuzz::expectErrorsOnly([&] { dtrain::data::readNpyLabels(path); });
  return 0;
}
