#include "data/ShardPack.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/Error.h"
#include "core/Rng.h"
#include "data/ImageCodec.h"
#include "data/ImageFolder.h"
#include "data/TarFile.h"

namespace dtrain::data {
namespace {

// NumPy's .npy header for one sample (version 1.0, padded to 64 bytes).
std::string npyHeader(const char* descr, const Shape& shape) {
  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i) dims += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) dims += ",";
  std::string dict = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" +
                     dims + "), }";
  const size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(dict.size() & 0xff));
  out.push_back(static_cast<char>(dict.size() >> 8));
  return out + dict;
}

// The sample as uint8 when every value is exactly k / 255.0f (the reader's scaling).
bool asBytes(const float* x, int64_t n, std::vector<uint8_t>& out) {
  out.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const float k = std::round(x[i] * 255.0f);
    if (!(k >= 0 && k <= 255) || static_cast<float>(k) / 255.0f != x[i]) return false;
    out[static_cast<size_t>(i)] = static_cast<uint8_t>(k);
  }
  return true;
}

}  // namespace

std::string shardName(const std::string& prefix, int64_t index) {
  char digits[16];
  std::snprintf(digits, sizeof digits, "%06lld", static_cast<long long>(index));
  return prefix + "-" + digits + ".tar";
}

namespace {

void makeOutputDir(const std::string& prefix, int64_t shardSize) {
  DTRAIN_CHECK_USAGE(shardSize >= 1, "--shard-size must be >= 1, got ", shardSize);
  const std::filesystem::path dir = std::filesystem::path(prefix).parent_path();
  std::error_code ec;
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  DTRAIN_CHECK_USAGE(!ec, "--out ", prefix, ": cannot create ", dir.string(), " (", ec.message(), ")");
}

std::string packPattern(const std::string& prefix, const std::vector<std::string>& files) {
  return files.size() == 1
             ? files[0]
             : prefix + "-{000000.." + shardName("", static_cast<int64_t>(files.size()) - 1).substr(1, 6) + "}.tar";
}

// One sample as a WebDataset key's two members: <key>.<ext> (the payload) and <key>.cls.
void addSample(TarWriter& tar, int64_t index, const char* ext, const uint8_t* data, size_t size, int label) {
  char key[16];
  std::snprintf(key, sizeof key, "%09lld", static_cast<long long>(index));
  tar.add(std::string(key) + ext, data, size);
  const std::string cls = std::to_string(label);
  tar.add(std::string(key) + ".cls", cls.data(), cls.size());
}

}  // namespace

PackResult packImageFolder(const std::string& dir, const std::string& prefix, int64_t shardSize) {
  makeOutputDir(prefix, shardSize);
  std::vector<FolderImage> images = listImageFolder(dir).images;
  Rng rng(0x7061636bULL);  // "pack": the same shards from the same folder
  for (size_t i = images.size() - 1; i > 0; --i) std::swap(images[i], images[rng.below(i + 1)]);
  PackResult r;
  for (size_t begin = 0; begin < images.size(); begin += static_cast<size_t>(shardSize)) {
    r.files.push_back(shardName(prefix, static_cast<int64_t>(r.files.size())));
    TarWriter tar(r.files.back());
    for (size_t i = begin; i < std::min(images.size(), begin + static_cast<size_t>(shardSize)); ++i) {
      std::ifstream in(images[i].path, std::ios::binary);
      const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
      try {
        readImageSize(bytes.data(), bytes.size());
      } catch (const ImageError& e) {
        throw BadData(images[i].path, "", e.what());
      }
      const bool png = sniffImage(bytes.data(), bytes.size()) == ImageFormat::Png;
      addSample(tar, static_cast<int64_t>(i), png ? ".png" : ".jpg", bytes.data(), bytes.size(), images[i].label);
      ++r.samples;
    }
    tar.close();
    r.bytes += static_cast<int64_t>(std::filesystem::file_size(r.files.back()));
  }
  r.pattern = packPattern(prefix, r.files);
  return r;
}

PackResult packShards(const Dataset& ds, const std::string& prefix, int64_t shardSize) {
  makeOutputDir(prefix, shardSize);
  const std::string u8 = npyHeader("|u1", ds.sampleShape()), f32 = npyHeader("<f4", ds.sampleShape());
  const int64_t numel = ds.sampleNumel();
  std::vector<float> x(static_cast<size_t>(numel));
  std::vector<uint8_t> bytes, member;
  PackResult r;
  for (int64_t begin = 0; begin < ds.size(); begin += shardSize) {
    r.files.push_back(shardName(prefix, static_cast<int64_t>(r.files.size())));
    TarWriter tar(r.files.back());
    for (int64_t i = begin; i < std::min(ds.size(), begin + shardSize); ++i) {
      int32_t label = 0;
      ds.gather(&i, 1, x.data(), &label);
      const bool small = asBytes(x.data(), numel, bytes);
      const std::string& header = small ? u8 : f32;
      member.assign(header.begin(), header.end());
      const auto* data = small ? bytes.data() : reinterpret_cast<const uint8_t*>(x.data());
      member.insert(member.end(), data, data + (small ? numel : numel * 4));
      addSample(tar, i, ".npy", member.data(), member.size(), label);
      ++r.samples;
    }
    tar.close();
    r.bytes += static_cast<int64_t>(std::filesystem::file_size(r.files.back()));
  }
  r.pattern = packPattern(prefix, r.files);
  return r;
}

}  // namespace dtrain::data
