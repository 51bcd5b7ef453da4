#include "data/IdxFile.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <memory>
#include <sstream>

#include "core/Error.h"

namespace dtrain::data {
namespace {

std::string hex(uint64_t v, int width) {
  std::ostringstream os;
  os << "0x" << std::hex << std::setw(width) << std::setfill('0') << v;
  return os.str();
}

std::string dimsStr(const std::vector<int64_t>& dims) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < dims.size(); ++i) os << (i ? ", " : "") << dims[i];
  os << ']';
  return os.str();
}

const char* typeName(uint8_t code) {
  switch (code) {
    case 0x08:
      return "unsigned byte";
    case 0x09:
      return "signed byte";
    case 0x0B:
      return "int16";
    case 0x0C:
      return "int32";
    case 0x0D:
      return "float32";
    case 0x0E:
      return "float64";
    default:
      return "not an IDX type";
  }
}

uint32_t bigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

std::vector<uint8_t> readFile(const std::string& path) {
  std::error_code ec;
  DTRAIN_CHECK_USAGE(!std::filesystem::is_directory(path, ec), "file ", path,
                     ": is a directory, expected an IDX file");
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  DTRAIN_CHECK_USAGE(f != nullptr, "file ", path, ": cannot open (", std::strerror(errno), ")");
  std::vector<uint8_t> bytes;
  uint8_t chunk[1 << 16];
  size_t got;
  while ((got = std::fread(chunk, 1, sizeof(chunk), f.get())) > 0)
    bytes.insert(bytes.end(), chunk, chunk + got);
  DTRAIN_CHECK(!std::ferror(f.get()), "file ", path, ": read error (", std::strerror(errno), ")");
  return bytes;
}

bool isGzip(const std::vector<uint8_t>& b) { return b.size() >= 2 && b[0] == 0x1f && b[1] == 0x8b; }

// Inflates every gzip member of `in` (gzip allows concatenated members).
std::vector<uint8_t> gunzip(const std::string& path, const std::vector<uint8_t>& in) {
  DTRAIN_CHECK(in.size() < (size_t{1} << 32), "file ", path, ": compressed file over 4 GiB");
  z_stream zs{};
  DTRAIN_CHECK(inflateInit2(&zs, 15 + 16) == Z_OK, "file ", path, ": zlib inflateInit failed");
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&zs, &inflateEnd);

  // The gzip trailer's ISIZE (size mod 2^32) is a good first guess of the output size.
  size_t guess = in.size() >= 18 ? in[in.size() - 4] | (in[in.size() - 3] << 8) |
                                       (in[in.size() - 2] << 16) | (size_t{in[in.size() - 1]} << 24)
                                 : 0;
  // Capped: a corrupt trailer must not make us allocate gigabytes (deflate expands <= 1032x).
  guess = std::min(guess, in.size() * 1032);
  std::vector<uint8_t> out(std::max<size_t>(guess, 1 << 16));
  size_t produced = 0;
  zs.next_in = const_cast<Bytef*>(in.data());
  zs.avail_in = static_cast<uInt>(in.size());
  for (;;) {
    if (produced == out.size()) out.resize(out.size() * 2);
    const size_t room = std::min<size_t>(out.size() - produced, size_t{1} << 30);
    zs.next_out = out.data() + produced;
    zs.avail_out = static_cast<uInt>(room);
    const int rc = inflate(&zs, Z_NO_FLUSH);
    produced += room - zs.avail_out;
    if (rc == Z_STREAM_END) {
      if (zs.avail_in == 0) break;
      const size_t pos = in.size() - zs.avail_in;
      DTRAIN_CHECK_USAGE(zs.avail_in >= 2 && in[pos] == 0x1f && in[pos + 1] == 0x8b, "file ", path,
                         ": trailing garbage after the gzip stream (", zs.avail_in,
                         " bytes at offset ", pos, ")");
      DTRAIN_CHECK(inflateReset(&zs) == Z_OK, "file ", path, ": zlib inflateReset failed");
      continue;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && zs.avail_in == 0)
      throw UsageError(detail::concat("file ", path,
                                      ": corrupt gzip stream (compressed data ends early, after ",
                                      produced, " uncompressed bytes)"));
    if (rc == Z_BUF_ERROR) continue;  // output full: grow and go on
    throw UsageError(detail::concat("file ", path, ": corrupt gzip stream (",
                                    zs.msg ? zs.msg : zError(rc), ")"));
  }
  out.resize(produced);
  return out;
}

// The dims of the header at the start of `bytes`; `header` gets its size.
std::vector<int64_t> parseIdxHeader(const std::string& path, const std::vector<uint8_t>& bytes,
                                    int expectedDims, size_t& header) {
  const size_t size = bytes.size();
  if (size < 4 || bytes[0] != 0 || bytes[1] != 0) {
    std::ostringstream first;
    for (size_t i = 0; i < std::min<size_t>(size, 4); ++i)
      first << (i ? " " : "") << std::hex << std::setw(2) << std::setfill('0') << int(bytes[i]);
    throw UsageError(detail::concat(
        "file ", path, ": not a gzip file and not an IDX file (bad magic: first bytes [",
        first.str(), "], expected 00 00 08 0N, or 1f 8b for gzip)"));
  }
  const uint32_t magic = bigEndian32(bytes.data());
  const uint8_t type = bytes[2];
  const int nd = bytes[3];
  DTRAIN_CHECK_USAGE(type == kIdxUByte, "file ", path, ": unsupported IDX type code ", hex(type, 2),
                     " (", typeName(type), ") in magic ", hex(magic, 8),
                     "; only 0x08 (unsigned byte) is supported");
  DTRAIN_CHECK_USAGE(nd >= 1, "file ", path, ": IDX magic ", hex(magic, 8),
                     " declares 0 dimensions");
  DTRAIN_CHECK_USAGE(expectedDims < 1 || nd == expectedDims, "file ", path,
                     ": dims count mismatch: expected a ", expectedDims,
                     "-dimensional IDX array (magic ", hex(0x800u + expectedDims, 8), "), found ",
                     nd, " dimension(s) (magic ", hex(magic, 8), ")");
  header = 4 + 4 * static_cast<size_t>(nd);
  DTRAIN_CHECK_USAGE(size >= header, "file ", path, ": truncated IDX header: ", nd,
                     " dimension sizes need ", header, " bytes, found ", size);

  std::vector<int64_t> dims;
  int64_t numel = 1;
  for (int d = 0; d < nd; ++d) {
    dims.push_back(bigEndian32(bytes.data() + 4 + 4 * d));
    // Caps the product at 2^40 (far above any real data set), checked before
    // multiplying: 2^40 times a 32-bit size would overflow (found by
    // tests/fuzz: FuzzIdx).
    constexpr int64_t kMaxNumel = int64_t{1} << 40;
    DTRAIN_CHECK_USAGE(dims.back() == 0 || numel <= kMaxNumel / dims.back(), "file ", path,
                       ": IDX dims ", dimsStr(dims), "... are implausibly large");
    numel *= dims.back();
  }
  return dims;
}

IdxArray parseIdx(const std::string& path, std::vector<uint8_t> bytes, int expectedDims) {
  const size_t size = bytes.size();
  size_t header = 0;
  IdxArray a;
  a.dims = parseIdxHeader(path, bytes, expectedDims, header);
  const int nd = static_cast<int>(a.dims.size());
  int64_t numel = 1;
  for (int64_t d : a.dims) numel *= d;
  const char* what = nd == 1 ? "label data" : "pixel data";
  const size_t have = size - header;
  DTRAIN_CHECK_USAGE(have >= static_cast<size_t>(numel), "file ", path, ": truncated: expected ",
                     numel, " bytes of ", what, " for dims ", dimsStr(a.dims), ", found ", have);
  DTRAIN_CHECK_USAGE(have == static_cast<size_t>(numel), "file ", path,
                     ": trailing garbage: ", have - numel, " bytes after the ", numel, " bytes of ",
                     what, " for dims ", dimsStr(a.dims));
  bytes.erase(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(header));
  a.data = std::move(bytes);
  return a;
}

}  // namespace

std::vector<uint8_t> readMaybeGzip(const std::string& path) {
  std::vector<uint8_t> bytes = readFile(path);
  return isGzip(bytes) ? gunzip(path, bytes) : bytes;
}

IdxArray readIdx(const std::string& path, int expectedDims) {
  return parseIdx(path, readMaybeGzip(path), expectedDims);
}

std::vector<int64_t> readIdxDims(const std::string& path, int expectedDims) {
  std::error_code ec;
  DTRAIN_CHECK_USAGE(std::filesystem::is_regular_file(path, ec), "file ", path,
                     ": not found or not a regular file");
  // gzread reads gzip files and, transparently, raw ones.
  std::unique_ptr<gzFile_s, int (*)(gzFile)> f(gzopen(path.c_str(), "rb"), &gzclose);
  DTRAIN_CHECK_USAGE(f != nullptr, "file ", path, ": cannot open (", std::strerror(errno), ")");
  std::vector<uint8_t> bytes(4);
  int got = gzread(f.get(), bytes.data(), 4);
  if (got == 4 && bytes[0] == 0 && bytes[1] == 0) {
    bytes.resize(4 + 4 * size_t{bytes[3]});
    got += std::max(0, gzread(f.get(), bytes.data() + 4, static_cast<unsigned>(bytes.size() - 4)));
  }
  bytes.resize(static_cast<size_t>(std::max(got, 0)));
  size_t header = 0;
  return parseIdxHeader(path, bytes, expectedDims, header);  // throws on a bad or truncated header
}

void writeIdx(const std::string& path, const std::vector<int64_t>& dims,
              const std::vector<uint8_t>& data, bool gzip) {
  DTRAIN_CHECK(!dims.empty() && dims.size() < 256, "writeIdx ", path, ": bad rank ", dims.size());
  std::vector<uint8_t> bytes = {0, 0, kIdxUByte, static_cast<uint8_t>(dims.size())};
  int64_t numel = 1;
  for (int64_t d : dims) {
    DTRAIN_CHECK(d >= 0 && d < (int64_t{1} << 32), "writeIdx ", path, ": bad dim ", d);
    numel *= d;
    for (int s = 24; s >= 0; s -= 8) bytes.push_back(static_cast<uint8_t>(d >> s));
  }
  DTRAIN_CHECK(numel == static_cast<int64_t>(data.size()), "writeIdx ", path, ": dims ",
               dimsStr(dims), " need ", numel, " bytes, got ", data.size());
  bytes.insert(bytes.end(), data.begin(), data.end());
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    DTRAIN_CHECK(f != nullptr, "file ", path, ": cannot create (", std::strerror(errno), ")");
    const int wrote = gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    const int closed = gzclose(f);
    DTRAIN_CHECK(wrote == static_cast<int>(bytes.size()) && closed == Z_OK, "file ", path,
                 ": gzip write failed");
    return;
  }
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  DTRAIN_CHECK(f != nullptr, "file ", path, ": cannot create (", std::strerror(errno), ")");
  DTRAIN_CHECK(std::fwrite(bytes.data(), 1, bytes.size(), f.get()) == bytes.size(), "file ", path,
               ": write failed (", std::strerror(errno), ")");
}

}  // namespace dtrain::data
