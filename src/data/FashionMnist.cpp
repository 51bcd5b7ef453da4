#include "data/FashionMnist.h"

#include <array>
#include <filesystem>

#include "data/IdxFile.h"

namespace dtrain::data {
namespace fs = std::filesystem;
namespace {

const char* const kHowToGet =
    "install it with: apt-get install dataset-fashion-mnist, or pass --data-dir";
const char* const kIdxLayout =
    "--dataset idx reads train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte "
    "and t10k-labels-idx1-ubyte, each raw or .gz";

void checkDirectory(const std::string& dir, const char* hint) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw UsageError(detail::concat("data directory ", dir, " not found (", hint, ")"));
}

// `name` or `name.gz` inside dir; UsageError when neither exists.
std::string findFile(const std::string& dir, const std::string& name, const char* hint) {
  for (const std::string& candidate : {name + ".gz", name}) {
    const fs::path p = fs::path(dir) / candidate;
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  throw UsageError(
      detail::concat("data directory ", dir, " has no ", name, " or ", name, ".gz (", hint, ")"));
}

std::string imagesName(bool train) {
  return std::string(train ? "train" : "t10k") + "-images-idx3-ubyte";
}
std::string labelsName(bool train) {
  return std::string(train ? "train" : "t10k") + "-labels-idx1-ubyte";
}

// Images [N, rows, cols] and labels [N] as samples {1, rows, cols}; `expected`
// (a test set's: the training set's spec) fixes the sample shape and the classes.
std::shared_ptr<TensorDataset> loadIdxFiles(const std::string& imagesPath,
                                            const std::string& labelsPath,
                                            const DatasetSpec& expected) {
  const IdxArray images = readIdx(imagesPath, 3);
  const IdxArray labels = readIdx(labelsPath, 1);
  DTRAIN_CHECK_USAGE(images.count() == labels.count(), "file ", imagesPath, " has ", images.count(),
                     " images but file ", labelsPath, " has ", labels.count(), " labels");
  const int64_t n = images.count(), rows = images.dims[1], cols = images.dims[2];
  DTRAIN_CHECK_USAGE(n > 0 && rows > 0 && cols > 0, "file ", imagesPath, ": no images (dims [", n,
                     ", ", rows, ", ", cols, "])");
  const Shape sample{1, rows, cols};
  DTRAIN_CHECK_USAGE(expected.sampleShape.empty() || expected.sampleShape == sample, "file ",
                     imagesPath, ": images of shape ", shapeStr(sample),
                     " but the training images are ", shapeStr(expected.sampleShape));

  Tensor x = Tensor::empty({n, 1, rows, cols}, DType::F32);
  // A table of i / 255.0f gives bit-identical values to PyTorch's tensor / 255.0.
  std::array<float, 256> scale;
  for (int i = 0; i < 256; ++i) scale[i] = static_cast<float>(i) / 255.0f;
  float* px = x.data<float>();
  for (int64_t i = 0; i < images.numel(); ++i) px[i] = scale[images.data[i]];

  Tensor y = Tensor::empty({n}, DType::I32);
  int32_t* py = y.data<int32_t>();
  for (int64_t i = 0; i < n; ++i) py[i] = labels.data[i];
  const int numClasses = expected.numClasses > 0
                             ? expected.numClasses
                             : classCount(std::span<const int32_t>(py, static_cast<size_t>(n)));
  for (int64_t i = 0; i < n; ++i)
    DTRAIN_CHECK_USAGE(py[i] < numClasses, "file ", labelsPath, ": label ", py[i], " of sample ", i,
                       " is not a class in [0, ", numClasses, ")");
  return std::make_shared<TensorDataset>(std::move(x), std::move(y), numClasses);
}

}  // namespace

std::shared_ptr<TensorDataset> loadIdxDataset(const std::string& imagesPath,
                                              const std::string& labelsPath, int numClasses) {
  return loadIdxFiles(imagesPath, labelsPath, {{}, numClasses});
}

std::shared_ptr<TensorDataset> loadFashionMnist(const std::string& dir, bool train) {
  checkDirectory(dir, kHowToGet);
  return loadIdxFiles(findFile(dir, imagesName(train), kHowToGet),
                      findFile(dir, labelsName(train), kHowToGet), {{}, 10});
}

std::shared_ptr<TensorDataset> loadIdxDirectory(const std::string& dir, bool train,
                                                const DatasetSpec& expected) {
  checkDirectory(dir, kIdxLayout);
  return loadIdxFiles(findFile(dir, imagesName(train), kIdxLayout),
                      findFile(dir, labelsName(train), kIdxLayout), expected);
}

DatasetSpec idxDirectorySpec(const std::string& dir) {
  checkDirectory(dir, kIdxLayout);
  const std::vector<int64_t> dims = readIdxDims(findFile(dir, imagesName(true), kIdxLayout), 3);
  const IdxArray labels = readIdx(findFile(dir, labelsName(true), kIdxLayout), 1);
  const std::vector<int32_t> classes(labels.data.begin(), labels.data.end());
  return {{1, dims[1], dims[2]}, classCount(classes)};
}

}  // namespace dtrain::data
