#include "data/TarFile.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace dtrain::data {
namespace {

constexpr size_t kBlock = 512;
// Larger members are refused rather than allocated: no sample of a shard is this big,
// and a garbage size field must not become a huge allocation.
constexpr int64_t kMaxMember = int64_t{1} << 32;

std::string field(const std::vector<uint8_t>& b, size_t at, size_t len) {
  const auto* p = reinterpret_cast<const char*>(b.data() + at);
  return std::string(p, strnlen(p, len));
}

// Octal digits (space or NUL padded), or GNU base-256 when the first byte's high bit is set.
bool parseNumber(const std::vector<uint8_t>& b, size_t at, size_t len, int64_t& out) {
  out = 0;
  if (b[at] & 0x80) {
    for (size_t i = 1; i < len; ++i) {
      if (out > (int64_t{1} << 54)) return false;
      out = (out << 8) | b[at + i];
    }
    return (b[at] & 0x7f) == 0;
  }
  size_t i = at, end = at + len;
  while (i < end && b[i] == ' ') ++i;
  bool digits = false;
  for (; i < end && b[i] >= '0' && b[i] <= '7'; ++i, digits = true) {
    if (out > (int64_t{1} << 54)) return false;
    out = out * 8 + (b[i] - '0');
  }
  for (; i < end; ++i)
    if (b[i] != ' ' && b[i] != 0) return false;
  return digits;
}

bool checksumMatches(const std::vector<uint8_t>& b) {
  int64_t stored = 0;
  if (!parseNumber(b, 148, 8, stored)) return false;
  int64_t sum = 0;
  for (size_t i = 0; i < kBlock; ++i) sum += (i >= 148 && i < 156) ? ' ' : b[i];
  return sum == stored;
}

bool allZero(const std::vector<uint8_t>& b) {
  return std::all_of(b.begin(), b.end(), [](uint8_t v) { return v == 0; });
}

}  // namespace

BadData::BadData(std::string file, std::string member, const std::string& problem)
    : UsageError(file + (member.empty() ? "" : ": member " + member) + ": " + problem),
      file_(std::move(file)),
      member_(std::move(member)) {}

TarReader::TarReader(const std::string& path)
    : path_(path), file_(std::fopen(path.c_str(), "rb"), &std::fclose), buffer_(1 << 20) {
  std::error_code ec;
  DTRAIN_CHECK_USAGE(file_ != nullptr, path, ": cannot open (", std::strerror(errno), ")");
  DTRAIN_CHECK_USAGE(!std::filesystem::is_directory(path, ec), path,
                     ": is a directory, expected a .tar shard");
  std::setvbuf(file_.get(), buffer_.data(), _IOFBF, buffer_.size());
  fileSize_ = static_cast<int64_t>(std::filesystem::file_size(path, ec));
}

void TarReader::readExactly(void* out, size_t bytes, const char* what) {
  const size_t got = std::fread(out, 1, bytes, file_.get());
  pos_ += static_cast<int64_t>(got);
  if (got == bytes) return;
  DTRAIN_CHECK(!std::ferror(file_.get()), path_, ": read error (", std::strerror(errno), ")");
  throw BadData(path_, current_.name,
                detail::concat("truncated: the file ends inside the ", what, " (", got, " of ",
                               bytes, " bytes)"));
}

void TarReader::skipBytes(int64_t bytes, const char* what) {
  if (bytes == 0) return;
  if (pos_ + bytes > fileSize_)
    throw BadData(path_, current_.name,
                  detail::concat("truncated: the file ends inside the ", what, " (",
                                 fileSize_ - pos_, " of ", bytes, " bytes)"));
  if (bytes > (int64_t{1} << 16)) {  // large: seek (a scan reads only headers)
    DTRAIN_CHECK(fseeko(file_.get(), bytes, SEEK_CUR) == 0, path_, ": seek failed (",
                 std::strerror(errno), ")");
    pos_ += bytes;
    return;
  }
  char sink[4096];
  for (int64_t left = bytes; left > 0;) {
    const size_t n = static_cast<size_t>(std::min<int64_t>(left, sizeof sink));
    readExactly(sink, n, what);
    left -= static_cast<int64_t>(n);
  }
}

bool TarReader::readHeader(std::vector<uint8_t>& block, const std::string& after) {
  block.resize(kBlock);
  const size_t got = std::fread(block.data(), 1, kBlock, file_.get());
  pos_ += static_cast<int64_t>(got);
  DTRAIN_CHECK(!std::ferror(file_.get()), path_, ": read error (", std::strerror(errno), ")");
  if (got == 0) return false;  // the end of the file after a whole member
  if (got < kBlock)
    throw BadData(path_, "", detail::concat("truncated: a header of ", got, " of 512 bytes",
                                            after.empty() ? "" : " after member " + after));
  if (allZero(block)) return false;
  if (!checksumMatches(block))
    throw BadData(path_, "", detail::concat("not a tar file or corrupt: bad header checksum",
                                            after.empty() ? " at the start" : " after member " + after));
  return true;
}

std::string TarReader::readLongName(int64_t size, bool pax) {
  DTRAIN_CHECK_USAGE(size >= 0 && size < (1 << 20), path_, ": a long-name record of ", size,
                     " bytes");
  std::string text(static_cast<size_t>(size), '\0');
  readExactly(text.data(), text.size(), "long name");
  skipBytes((kBlock - size % kBlock) % kBlock, "long name");
  if (!pax) return std::string(text.c_str());
  // pax records: "<len> key=value\n"; only path matters here.
  for (size_t at = 0; at < text.size();) {
    const size_t space = text.find(' ', at);
    if (space == std::string::npos) break;
    const int64_t len = std::atoll(text.c_str() + at);
    if (len <= 0 || at + static_cast<size_t>(len) > text.size()) break;
    const std::string record = text.substr(space + 1, at + len - space - 2);
    if (record.starts_with("path=")) return record.substr(5);
    at += static_cast<size_t>(len);
  }
  return "";
}

bool TarReader::next(TarEntry& entry) {
  if (unread_ > 0 || padding_ > 0) skipData();
  const std::string after = current_.name;
  std::string longName;
  std::vector<uint8_t> block;
  for (;;) {
    if (!readHeader(block, after)) return false;
    int64_t size = 0;
    if (!parseNumber(block, 124, 12, size) || size > kMaxMember)
      throw BadData(path_, field(block, 0, 100), "bad size field in the tar header");
    if (pos_ + size > fileSize_)
      throw BadData(path_, field(block, 0, 100),
                    detail::concat("truncated: the member's ", size, " bytes run past the end of "
                                   "the file (", fileSize_ - pos_, " left)"));
    const char type = static_cast<char>(block[156]);
    if (type == 'L' || type == 'x') {
      std::string name = readLongName(size, type == 'x');
      if (!name.empty()) longName = name;
      continue;
    }
    std::string name = field(block, 0, 100);
    const std::string prefix = field(block, 345, 155);
    if (!prefix.empty() && std::memcmp(block.data() + 257, "ustar\0", 6) == 0)
      name = prefix + "/" + name;
    if (!longName.empty()) name = longName;
    longName.clear();
    current_ = {name, size};
    unread_ = size;
    padding_ = (kBlock - size % kBlock) % kBlock;
    if (type == '0' || type == '\0' || type == '7') {
      entry = current_;
      return true;
    }
    skipData();  // directories, links, devices: not samples
  }
}

void TarReader::readData(std::vector<uint8_t>& out) {
  out.resize(static_cast<size_t>(unread_));
  readExactly(out.data(), out.size(), "data");
  unread_ = 0;
  skipBytes(padding_, "padding");
  padding_ = 0;
}

void TarReader::readPrefix(std::vector<uint8_t>& out, int64_t limit) {
  out.resize(static_cast<size_t>(std::min(unread_, limit)));
  readExactly(out.data(), out.size(), "data");
  unread_ -= static_cast<int64_t>(out.size());
  skipData();
}

void TarReader::skipData() {
  skipBytes(unread_, "data");
  unread_ = 0;
  skipBytes(padding_, "padding");
  padding_ = 0;
}

TarWriter::TarWriter(const std::string& path) : path_(path) {
  file_ = std::fopen(path.c_str(), "wb");
  DTRAIN_CHECK_USAGE(file_ != nullptr, path, ": cannot create (", std::strerror(errno), ")");
}

TarWriter::~TarWriter() {
  if (file_) std::fclose(file_);
}

void TarWriter::write(const void* data, size_t size) {
  DTRAIN_CHECK(std::fwrite(data, 1, size, file_) == size, path_, ": write failed (",
               std::strerror(errno), ")");
}

void TarWriter::add(const std::string& name, const void* data, size_t size) {
  DTRAIN_CHECK(name.size() < 100, path_, ": member name too long for ustar: ", name);
  std::vector<uint8_t> h(kBlock, 0);
  std::memcpy(h.data(), name.data(), name.size());
  std::snprintf(reinterpret_cast<char*>(h.data() + 100), 8, "%07o", 0644);
  std::snprintf(reinterpret_cast<char*>(h.data() + 108), 8, "%07o", 0);
  std::snprintf(reinterpret_cast<char*>(h.data() + 116), 8, "%07o", 0);
  std::snprintf(reinterpret_cast<char*>(h.data() + 124), 12, "%011llo",
                static_cast<unsigned long long>(size));
  std::snprintf(reinterpret_cast<char*>(h.data() + 136), 12, "%011o", 0);
  h[156] = '0';
  std::memcpy(h.data() + 257, "ustar\0" "00", 8);
  std::memset(h.data() + 148, ' ', 8);
  unsigned sum = 0;
  for (uint8_t v : h) sum += v;
  std::snprintf(reinterpret_cast<char*>(h.data() + 148), 8, "%06o", sum);
  write(h.data(), h.size());
  if (size > 0) write(data, size);
  const std::vector<uint8_t> pad((kBlock - size % kBlock) % kBlock, 0);
  if (!pad.empty()) write(pad.data(), pad.size());
}

void TarWriter::close() {
  const std::vector<uint8_t> zeros(2 * kBlock, 0);
  write(zeros.data(), zeros.size());
  const int rc = std::fclose(file_);
  file_ = nullptr;
  DTRAIN_CHECK(rc == 0, path_, ": close failed (", std::strerror(errno), ")");
}

}  // namespace dtrain::data
