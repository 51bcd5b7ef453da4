#include "data/ShardSet.h"

#include <algorithm>
#include <cstring>
#include <fstream>

#include "core/Rng.h"
#include "data/ImageFolder.h"
#include "data/ImageSample.h"

namespace dtrain::data {
namespace {

class TarSamples final : public SampleSource {
 public:
  TarSamples(const std::string& path, const ImageDecoding& decoding, bool checkOnly)
      : reader_(path, /*headersOnly=*/checkOnly), decoding_(decoding), checkOnly_(checkOnly) {}
  bool next(Sample& out) override {
    if (!reader_.next(raw_)) return false;
    out = reader_.decode(raw_, checkOnly_, &decoding_);
    return true;
  }

 private:
  ShardReader reader_;
  ImageDecoding decoding_;
  bool checkOnly_;
  RawSample raw_;
};

// The bytes of `path`, the first `limit` of them when limit > 0; false when it cannot be read.
bool readFileBytes(const std::string& path, int64_t limit, std::vector<uint8_t>& out, bool& whole) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return false;
  const auto size = static_cast<int64_t>(in.tellg());
  const int64_t want = limit > 0 ? std::min(size, limit) : size;
  out.resize(static_cast<size_t>(want));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(out.data()), want);
  whole = want == size;
  return static_cast<bool>(in);
}

class FolderSamples final : public SampleSource {
 public:
  FolderSamples(const std::vector<FolderImage>& images, const ImageDecoding& decoding, bool checkOnly)
      : images_(images), decoding_(decoding), checkOnly_(checkOnly) {}
  bool next(Sample& out) override {
    if (next_ >= images_.size()) return false;
    const FolderImage& image = images_[next_++];
    out = Sample{};
    out.key = image.path;
    out.label = image.label;
    bool whole = false;
    if (!readFileBytes(image.path, checkOnly_ ? kImageHeaderBytes : 0, bytes_, whole))
      throw BadData(image.path, "", std::string("cannot read (") + std::strerror(errno) + ")");
    decodeImageSample(bytes_.data(), bytes_.size(), whole, decoding_, checkOnly_, image.path, "", out);
    return true;
  }

 private:
  const std::vector<FolderImage>& images_;
  ImageDecoding decoding_;
  bool checkOnly_;
  size_t next_ = 0;
  std::vector<uint8_t> bytes_;
};

// Groups of images that stand for shards: enough of them for many ranks and loader threads
// on a small folder, at most 256 images each on a large one.
int64_t folderGroupSize(int64_t images) {
  return std::clamp<int64_t>((images + 63) / 64, 1, 256);
}

}  // namespace

std::shared_ptr<const ShardSet> ShardSet::scan(const std::vector<std::string>& files,
                                               bool skipBad, const DatasetSpec& expected,
                                               const ImageOptions& images) {
  auto set = std::make_shared<ShardSet>();
  set->skipBad_ = skipBad;
  set->spec_ = expected;
  set->images_ = images;
  for (const std::string& path : files) set->files_.push_back(ShardFile{path});
  set->scanFiles(std::string("shards ") + files.front() + (files.size() > 1 ? " ..." : ""));
  return set;
}

std::shared_ptr<const ShardSet> ShardSet::scanFolder(const std::string& dir, bool skipBad,
                                                     const ImageOptions& images, uint64_t seed,
                                                     const ShardSet* train) {
  ImageFolderListing listing = listImageFolder(dir, train ? &train->classNames() : nullptr);
  auto set = std::make_shared<ShardSet>();
  set->skipBad_ = skipBad;
  set->images_ = images;
  set->classNames_ = listing.classes;
  set->spec_.numClasses = static_cast<int64_t>(listing.classes.size());
  if (train) set->spec_ = train->spec();
  // Dealt once in a seeded order, so that a group mixes the classes; the epochs reshuffle
  // the groups and the shuffle buffer the images.
  std::vector<FolderImage>& all = listing.images;
  Rng rng(seed ^ 0x666f6c646572ULL);  // "folder"
  for (size_t i = all.size() - 1; i > 0; --i) std::swap(all[i], all[rng.below(i + 1)]);
  const auto group = static_cast<size_t>(folderGroupSize(static_cast<int64_t>(all.size())));
  for (size_t begin = 0; begin < all.size(); begin += group) {
    ShardFile f{all[begin].path};
    f.images.assign(all.begin() + static_cast<std::ptrdiff_t>(begin),
                    all.begin() + static_cast<std::ptrdiff_t>(std::min(all.size(), begin + group)));
    set->files_.push_back(std::move(f));
  }
  set->scanFiles("image folder " + dir);
  return set;
}

void ShardSet::scanFiles(const std::string& what) {
  const bool fixedClasses = spec_.numClasses > 0;
  int32_t maxLabel = -1;
  const ImageDecoding decoding{images_};
  for (size_t i = 0; i < files_.size(); ++i) {
    ShardFile& f = files_[i];
    auto source = open(i, decoding, /*checkOnly=*/true);
    for (;;) {
      try {
        Sample s;
        if (!source->next(s)) break;
        if (spec_.sampleShape.empty()) spec_.sampleShape = s.shape;
        check(s, f.images.empty() ? f.path : s.key);
        holdsImages_ = holdsImages_ || s.image;
        maxLabel = std::max(maxLabel, s.label);
        ++f.samples;
      } catch (const BadData&) {
        if (!skipBad_) throw;
        ++f.badSamples;
      }
    }
    samples_ += f.samples;
    badSamples_ += f.badSamples;
  }
  DTRAIN_CHECK_USAGE(samples_ > 0, what, ": no samples");
  if (!fixedClasses) spec_.numClasses = maxLabel + 1;
}

std::unique_ptr<SampleSource> ShardSet::open(size_t index, const ImageDecoding& decoding,
                                             bool checkOnly) const {
  const ShardFile& f = files_.at(index);
  if (f.images.empty()) return std::make_unique<TarSamples>(f.path, decoding, checkOnly);
  return std::make_unique<FolderSamples>(f.images, decoding, checkOnly);
}

void ShardSet::check(const Sample& s, const std::string& file) const {
  const size_t colon = s.key.rfind(':');
  const std::string member = colon == std::string::npos ? "" : s.key.substr(colon + 1);
  if (s.shape != spec_.sampleShape)
    throw BadData(file, member,
                  detail::concat("samples of shape ", shapeStr(s.shape), ", the set's are ",
                                 shapeStr(spec_.sampleShape)));
  if (spec_.numClasses > 0 && s.label >= spec_.numClasses)
    throw BadData(file, member,
                  detail::concat("the label ", s.label, " is not one of the training set's ",
                                 spec_.numClasses, " classes"));
}

int64_t ShardSet::minSamplesPerRank(int worldSize) const {
  const auto shards = static_cast<int64_t>(files_.size());
  DTRAIN_CHECK_USAGE(shards >= worldSize, shards, " shard", shards == 1 ? "" : "s", " for ",
                     worldSize, " ranks: every rank reads whole shards, so there must be at least "
                     "one per rank (pack smaller shards: dtrain data pack --shard-size)");
  std::vector<int64_t> counts;
  for (const ShardFile& f : files_) counts.push_back(f.samples);
  std::sort(counts.begin(), counts.end());
  int64_t sum = 0;
  for (int64_t i = 0; i < shards / worldSize; ++i) sum += counts[static_cast<size_t>(i)];
  return sum;
}

}  // namespace dtrain::data
