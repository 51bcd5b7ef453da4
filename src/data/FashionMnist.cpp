#include "data/FashionMnist.h"

#include <array>
#include <filesystem>

#include "data/IdxFile.h"

namespace dtrain::data {
namespace fs = std::filesystem;
namespace {

const char* const kHowToGet =
    "install it with: apt-get install dataset-fashion-mnist, or pass --data-dir";

// `name` or `name.gz` inside dir; UsageError when neither exists.
std::string findFile(const std::string& dir, const std::string& name) {
  for (const std::string& candidate : {name + ".gz", name}) {
    const fs::path p = fs::path(dir) / candidate;
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  throw UsageError(detail::concat("data directory ", dir, " has no ", name, " or ", name, ".gz (",
                                  kHowToGet, ")"));
}

}  // namespace

std::shared_ptr<TensorDataset> loadIdxDataset(const std::string& imagesPath,
                                              const std::string& labelsPath, int numClasses) {
  const IdxArray images = readIdx(imagesPath, 3);
  const IdxArray labels = readIdx(labelsPath, 1);
  DTRAIN_CHECK(images.count() == labels.count(), "file ", imagesPath, " has ", images.count(),
               " images but file ", labelsPath, " has ", labels.count(), " labels");
  const int64_t n = images.count(), rows = images.dims[1], cols = images.dims[2];

  Tensor x = Tensor::empty({n, 1, rows, cols}, DType::F32);
  // A table of i / 255.0f gives bit-identical values to PyTorch's tensor / 255.0.
  std::array<float, 256> scale;
  for (int i = 0; i < 256; ++i) scale[i] = static_cast<float>(i) / 255.0f;
  float* px = x.data<float>();
  for (int64_t i = 0; i < images.numel(); ++i) px[i] = scale[images.data[i]];

  Tensor y = Tensor::empty({n}, DType::I32);
  int32_t* py = y.data<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    DTRAIN_CHECK(labels.data[i] < numClasses, "file ", labelsPath, ": label ", int(labels.data[i]),
                 " of sample ", i, " is not a class in [0, ", numClasses, ")");
    py[i] = labels.data[i];
  }
  return std::make_shared<TensorDataset>(std::move(x), std::move(y), numClasses);
}

std::shared_ptr<TensorDataset> loadFashionMnist(const std::string& dir, bool train) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw UsageError(detail::concat("data directory ", dir, " not found (", kHowToGet, ")"));
  const std::string prefix = train ? "train" : "t10k";
  const std::string images = findFile(dir, prefix + "-images-idx3-ubyte");
  const std::string labels = findFile(dir, prefix + "-labels-idx1-ubyte");
  return loadIdxDataset(images, labels, 10);
}

}  // namespace dtrain::data
