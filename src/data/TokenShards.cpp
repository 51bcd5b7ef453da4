#include "data/TokenShards.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/TarFile.h"

namespace dtrain::data {
namespace {

int readVocab(const std::filesystem::path& dir) {
  const std::filesystem::path meta = dir / "meta.json";
  std::ifstream f(meta);
  if (!f) return 0;
  std::stringstream text;
  text << f.rdbuf();
  const std::string s = text.str();
  const size_t key = s.find("\"vocab_size\"");
  const size_t colon = key == std::string::npos ? key : s.find(':', key);
  long v = colon == std::string::npos ? -1 : std::strtol(s.c_str() + colon + 1, nullptr, 10);
  if (v < 1 || v > 65536)
    throw BadData(meta.string(), "", "no \"vocab_size\" between 1 and 65536 (uint16 tokens)");
  return static_cast<int>(v);
}

}  // namespace

TokenShards::TokenShards(const std::vector<std::string>& paths, const std::string& name) {
  for (const std::string& path : paths) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    DTRAIN_CHECK_USAGE(fd >= 0, name, " ", path, ": cannot open (", std::strerror(errno), ")");
    File f{path};
    const off_t size = ::lseek(fd, 0, SEEK_END);
    if (size % 2 != 0) {
      ::close(fd);
      throw BadData(path, "", detail::concat("an odd size (", size, " bytes): not uint16 tokens"));
    }
    f.count = size / 2;
    f.mappedBytes = static_cast<size_t>(size);
    if (size > 0) {
      void* p = ::mmap(nullptr, f.mappedBytes, PROT_READ, MAP_PRIVATE, fd, 0);
      DTRAIN_CHECK(p != MAP_FAILED, path, ": mmap failed (", std::strerror(errno), ")");
      ::madvise(p, f.mappedBytes, MADV_RANDOM);  // windows fall anywhere
      f.tokens = static_cast<const uint16_t*>(p);
    }
    ::close(fd);
    total_ += f.count;
    files_.push_back(f);
    const int vocab = readVocab(std::filesystem::path(path).parent_path());
    if (vocab_ == 0) vocab_ = vocab;
  }
}

TokenShards::~TokenShards() {
  for (File& f : files_)
    if (f.tokens) ::munmap(const_cast<uint16_t*>(f.tokens), f.mappedBytes);
}

int64_t TokenShards::windowStarts(int64_t block) const {
  int64_t n = 0;
  for (const File& f : files_) n += std::max<int64_t>(0, f.count - block);
  return n;
}

void TokenShards::fill(const std::vector<int64_t>& starts, int64_t block, int vocab,
                       Batch& out) const {
  const auto count = static_cast<int64_t>(starts.size());
  out.x = Tensor::empty({count, block}, DType::I32);
  out.y = Tensor::empty({count, block}, DType::I32);
  int32_t* x = out.x.data<int32_t>();
  int32_t* y = out.y.data<int32_t>();
  for (int64_t i = 0; i < count; ++i) {
    int64_t at = starts[static_cast<size_t>(i)];
    size_t f = 0;
    for (; f < files_.size() && at >= std::max<int64_t>(0, files_[f].count - block); ++f)
      at -= std::max<int64_t>(0, files_[f].count - block);
    DTRAIN_CHECK(f < files_.size(), "token shards: window start out of range");
    const uint16_t* t = files_[f].tokens + at;
    for (int64_t j = 0; j <= block; ++j)
      if (t[j] >= vocab)
        throw BadData(files_[f].path, "",
                      detail::concat("token ", t[j], " at token offset ", at + j,
                                     " is not below the model's vocabulary of ", vocab));
    for (int64_t j = 0; j < block; ++j) {
      x[i * block + j] = t[j];
      y[i * block + j] = t[j + 1];
    }
  }
}

std::vector<std::string> packTextTokens(const std::vector<uint8_t>& bytes, const std::string& prefix,
                                        int64_t shardTokens) {
  DTRAIN_CHECK_USAGE(shardTokens >= 2, "--shard-size must be >= 2 tokens, got ", shardTokens);
  const std::filesystem::path dir = std::filesystem::path(prefix).parent_path();
  std::error_code ec;
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  std::vector<std::string> files;
  std::vector<uint16_t> tokens;
  for (size_t begin = 0; begin < bytes.size(); begin += static_cast<size_t>(shardTokens)) {
    char name[16];
    std::snprintf(name, sizeof name, "-%06zu.bin", files.size());
    files.push_back(prefix + name);
    const size_t end = std::min(bytes.size(), begin + static_cast<size_t>(shardTokens));
    tokens.assign(bytes.begin() + static_cast<std::ptrdiff_t>(begin),
                  bytes.begin() + static_cast<std::ptrdiff_t>(end));
    std::ofstream out(files.back(), std::ios::binary);
    out.write(reinterpret_cast<const char*>(tokens.data()),
              static_cast<std::streamsize>(tokens.size() * 2));  // little-endian hosts
    DTRAIN_CHECK(out.good(), files.back(), ": write failed");
  }
  std::ofstream meta((dir.empty() ? std::filesystem::path(".") : dir) / "meta.json");
  meta << "{\"vocab_size\": 256, \"dtype\": \"uint16\", \"tokenizer\": \"bytes\"}\n";
  DTRAIN_CHECK(meta.good(), prefix, ": cannot write meta.json");
  return files;
}

}  // namespace dtrain::data
