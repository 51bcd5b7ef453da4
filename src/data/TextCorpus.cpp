#include "data/TextCorpus.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "core/Error.h"

namespace dtrain::data {

TextCorpus::TextCorpus(std::vector<uint8_t> bytes, std::string name)
    : bytes_(std::move(bytes)), name_(std::move(name)), trainSize_(trainSizeFor(size())) {
  DTRAIN_CHECK_USAGE(!bytes_.empty(), "text corpus ", name_, " is empty");
}

std::shared_ptr<const TextCorpus> TextCorpus::fromFile(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  DTRAIN_CHECK_USAGE(st.type() != fs::file_type::not_found, "text file ", path, " does not exist");
  DTRAIN_CHECK(!ec, "text file ", path, ": cannot access (", ec.message(), ")");
  DTRAIN_CHECK_USAGE(st.type() != fs::file_type::directory, "text file ", path,
                     " is a directory, expected a file");
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  DTRAIN_CHECK(f != nullptr, "text file ", path, ": cannot open (", std::strerror(errno), ")");
  std::vector<uint8_t> bytes;
  // The size is a hint only (a pipe or /proc file reports 0): read to the end regardless.
  if (const auto n = fs::file_size(path, ec); !ec) bytes.reserve(n);
  uint8_t chunk[1 << 16];
  size_t got;
  while ((got = std::fread(chunk, 1, sizeof(chunk), f.get())) > 0)
    bytes.insert(bytes.end(), chunk, chunk + got);
  DTRAIN_CHECK(!std::ferror(f.get()), "text file ", path, ": read error (", std::strerror(errno),
               ")");
  DTRAIN_CHECK_USAGE(!bytes.empty(), "text file ", path, " is empty");
  return std::make_shared<const TextCorpus>(std::move(bytes), path);
}

void TextCorpus::requireWindows(int64_t block) const {
  DTRAIN_CHECK_USAGE(block >= 1, "block (context length) must be >= 1, got ", block);
  const auto check = [&](const char* split, int64_t have, const char* part) {
    DTRAIN_CHECK_USAGE(have >= block + 1, "text corpus ", name_, " (", size(), " bytes): its ",
                       split, " split (", part, ") has ", have,
                       " bytes, fewer than one window of block + 1 = ", block + 1,
                       " bytes; use a longer file or a smaller block");
  };
  check("training", trainSize(), "the first 90%");
  check("validation", validationSize(), "the last 10%");
}

}  // namespace dtrain::data
