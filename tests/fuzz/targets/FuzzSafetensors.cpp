// safetensors files (checkpoints, --load, --init-from): header JSON, dtypes,
// shapes and data offsets against the file's size.
#include "fuzz/FuzzInput.h"
#include "runtime/Safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = dtrain::fuzz::inputFile(data, size, ".safetensors");
  dtrain::fuzz::expectErrorsOnly([&] {
    dtrain::runtime::SafetensorsFile f = dtrain::runtime::loadSafetensors(path);
    // Touch every tensor's bytes: a shape that overstates its data must have been refused.
    volatile uint8_t sink = 0;
    for (const auto& [name, t] : f.tensors)
      if (t.nbytes() > 0) sink = sink + static_cast<const uint8_t*>(t.rawData())[t.nbytes() - 1];
  });
  return 0;
}
