#include "data/NpyFile.h"

#include <array>
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

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

using File = std::unique_ptr<FILE, int (*)(FILE*)>;

std::string origin(const std::string& path, const std::string& name) {
  return name.empty() ? "file " + path : name;
}

// "(3, 2)": the shape as NumPy prints it.
std::string tupleStr(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << '(';
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << (shape.size() == 1 ? ",)" : ")");
  return os.str();
}

File openFile(const std::string& path, const std::string& who) {
  std::error_code ec;
  DTRAIN_CHECK_USAGE(std::filesystem::exists(path, ec), who, ": no such file");
  DTRAIN_CHECK_USAGE(!std::filesystem::is_directory(path, ec), who,
                     ": is a directory, expected a .npy file");
  File f(std::fopen(path.c_str(), "rb"), &std::fclose);
  DTRAIN_CHECK_USAGE(f != nullptr, who, ": cannot open (", std::strerror(errno), ")");
  return f;
}

int64_t fileSize(FILE* f) {
  std::fseek(f, 0, SEEK_END);
  const int64_t size = std::ftell(f);
  std::fseek(f, 0, SEEK_SET);
  return size;
}

// The value text after `key` in the header dict ('key' or "key", then ':').
size_t valueAfter(const std::string& header, const std::string& key, const std::string& who) {
  for (const char q : {'\'', '"'}) {
    const size_t at = header.find(q + key + q);
    if (at == std::string::npos) continue;
    size_t i = header.find(':', at + key.size() + 2);
    if (i == std::string::npos) break;
    ++i;
    while (i < header.size() && header[i] == ' ') ++i;
    return i;
  }
  throw UsageError(
      detail::concat(who, ": the .npy header has no '", key, "' (header: ", header, ")"));
}

void parseDict(const std::string& header, NpyHeader& h, const std::string& who) {
  const auto bad = [&](const char* what) {
    return UsageError(
        detail::concat(who, ": cannot parse the .npy header's ", what, " (header: ", header, ")"));
  };
  size_t i = valueAfter(header, "descr", who);
  if (i < header.size() && header[i] == '[')
    throw UsageError(detail::concat(who, ": unsupported dtype: a structured array (descr ",
                                    header.substr(i, header.find(']', i) - i + 1),
                                    "); save a plain numeric array"));
  if (i >= header.size() || (header[i] != '\'' && header[i] != '"')) throw bad("descr");
  const size_t end = header.find(header[i], i + 1);
  if (end == std::string::npos) throw bad("descr");
  h.descr = header.substr(i + 1, end - i - 1);

  i = valueAfter(header, "fortran_order", who);
  if (header.compare(i, 4, "True") == 0)
    h.fortranOrder = true;
  else if (header.compare(i, 5, "False") == 0)
    h.fortranOrder = false;
  else
    throw bad("fortran_order");

  i = valueAfter(header, "shape", who);
  if (i >= header.size() || header[i] != '(') throw bad("shape");
  for (++i;;) {
    while (i < header.size() && (header[i] == ' ' || header[i] == ',')) ++i;
    if (i >= header.size()) throw bad("shape");
    if (header[i] == ')') break;
    size_t used = 0;
    int64_t d = 0;
    try {
      d = std::stoll(header.substr(i), &used);
    } catch (const std::exception&) {
      throw bad("shape");
    }
    if (d < 0 || used == 0) throw bad("shape");
    h.shape.push_back(d);
    i += used;
    if (i < header.size() && header[i] == 'L') ++i;  // Python 2 wrote longs as 3L
  }
}

int64_t itemSizeOf(const std::string& descr) {
  static const std::pair<const char*, int64_t> kKnown[] = {
      {"<f4", 4}, {"<f8", 8}, {"<i8", 8}, {"<i4", 4}, {"|u1", 1}, {"<u1", 1}, {">u1", 1}};
  for (const auto& [d, size] : kKnown)
    if (descr == d) return size;
  return 0;
}

bool isUint8(const std::string& descr) { return itemSizeOf(descr) == 1; }

// Throws unless `h` is a C-order, little-endian array of one of `allowed`.
void checkDtype(const NpyHeader& h, const std::string& who, const char* role,
                std::initializer_list<const char*> allowed, const char* supported) {
  DTRAIN_CHECK_USAGE(!h.fortranOrder, who,
                     ": Fortran-order arrays are not supported; save a C-order copy "
                     "(np.save(path, np.ascontiguousarray(a)))");
  DTRAIN_CHECK_USAGE(
      h.descr.empty() || h.descr[0] != '>' || isUint8(h.descr), who, ": big-endian data (dtype '",
      h.descr,
      "') is not supported; save a little-endian copy (a.astype(a.dtype.newbyteorder('<')))");
  for (const char* d : allowed)
    if (h.descr == d || (isUint8(d) && isUint8(h.descr))) return;
  throw UsageError(detail::concat(who, ": unsupported ", role, " dtype '", h.descr,
                                  "' (supported: ", supported, ")"));
}

// Reads `count` elements of `h` from `f` (positioned at the data) into `out`,
// converting each with `convert(const Src*)`; in chunks, so no second copy of
// the whole array is ever held.
template <typename Src, typename Dst, typename Convert>
void readConverted(FILE* f, const std::string& who, int64_t count, Dst* out, Convert convert) {
  constexpr int64_t kChunk = 1 << 16;
  std::vector<Src> buf(static_cast<size_t>(std::min(count, kChunk)));
  for (int64_t done = 0; done < count;) {
    const int64_t n = std::min(kChunk, count - done);
    DTRAIN_CHECK(
        std::fread(buf.data(), sizeof(Src), static_cast<size_t>(n), f) == static_cast<size_t>(n),
        who, ": read error (", std::strerror(errno), ")");
    for (int64_t i = 0; i < n; ++i) out[done + i] = convert(buf[i], done + i);
    done += n;
  }
}

// Opens `path`, reads its header and checks that the data size matches it.
struct OpenedNpy {
  File file{nullptr, &std::fclose};
  NpyHeader header;
};

OpenedNpy openNpy(const std::string& path, const std::string& who) {
  OpenedNpy o;
  o.file = openFile(path, who);
  FILE* f = o.file.get();
  const int64_t size = fileSize(f);
  std::array<uint8_t, 12> pre{};
  const size_t got = std::fread(pre.data(), 1, pre.size(), f);
  if (got < 8 || std::memcmp(pre.data(), kMagic, kMagicSize) != 0) {
    std::ostringstream first;
    for (size_t i = 0; i < std::min<size_t>(got, 6); ++i)
      first << (i ? " " : "") << std::hex << std::setw(2) << std::setfill('0') << int(pre[i]);
    throw UsageError(detail::concat(who, ": not a .npy file (bad magic: first bytes [", first.str(),
                                    "], expected 93 4e 55 4d 50 59, \"\\x93NUMPY\")"));
  }
  NpyHeader& h = o.header;
  h.major = pre[6];
  h.minor = pre[7];
  DTRAIN_CHECK_USAGE(h.major >= 1 && h.major <= 3 && h.minor == 0, who,
                     ": unsupported .npy format version ", h.major, ".", h.minor,
                     " (supported: 1.0, 2.0, 3.0)");
  const int lenBytes = h.major == 1 ? 2 : 4;
  DTRAIN_CHECK_USAGE(got >= static_cast<size_t>(8 + lenBytes), who, ": truncated .npy header");
  int64_t headerLen = 0;
  for (int b = lenBytes - 1; b >= 0; --b) headerLen = (headerLen << 8) | pre[8 + b];
  h.dataOffset = 8 + lenBytes + headerLen;
  DTRAIN_CHECK_USAGE(h.dataOffset <= size, who, ": truncated .npy header (", headerLen,
                     " bytes declared, ", size - 8 - lenBytes, " in the file)");
  std::string text(static_cast<size_t>(headerLen), '\0');
  std::fseek(f, 8 + lenBytes, SEEK_SET);
  DTRAIN_CHECK(std::fread(text.data(), 1, text.size(), f) == text.size(), who, ": read error (",
               std::strerror(errno), ")");
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  parseDict(text, h, who);
  h.itemSize = itemSizeOf(h.descr);
  // Caps the element count well below overflow (and far above any real data set).
  int64_t numel = 1;
  for (int64_t d : h.shape) {
    numel = d == 0 ? 0 : numel * d;
    DTRAIN_CHECK_USAGE(numel <= (int64_t{1} << 40), who, ": shape ", tupleStr(h.shape),
                       " is implausibly large");
  }
  if (h.itemSize > 0 && !h.fortranOrder) {
    const int64_t need = numel * h.itemSize, have = size - h.dataOffset;
    DTRAIN_CHECK_USAGE(have >= need, who, ": truncated: shape ", tupleStr(h.shape), " of '",
                       h.descr, "' needs ", need, " bytes of data, found ", have);
    DTRAIN_CHECK_USAGE(have == need, who, ": trailing garbage: ", have - need, " bytes after the ",
                       need, " bytes of data of shape ", tupleStr(h.shape));
  }
  return o;
}

}  // namespace

int64_t NpyHeader::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

NpyHeader readNpyHeader(const std::string& path, const std::string& name) {
  return openNpy(path, origin(path, name)).header;
}

Tensor readNpyFeatures(const std::string& path, const std::string& name) {
  const std::string who = origin(path, name);
  OpenedNpy o = openNpy(path, who);
  const NpyHeader& h = o.header;
  checkDtype(h, who, "feature", {"<f4", "<f8", "|u1"}, "float32 <f4, float64 <f8, uint8 |u1");
  DTRAIN_CHECK_USAGE(!h.shape.empty(), who, ": a scalar, expected features [N, ...]");
  DTRAIN_CHECK_USAGE(h.shape[0] > 0, who, ": no samples (shape ", tupleStr(h.shape), ")");
  for (size_t d = 1; d < h.shape.size(); ++d)
    DTRAIN_CHECK_USAGE(h.shape[d] > 0, who, ": empty samples (shape ", tupleStr(h.shape), ")");
  Shape shape = h.shape;
  if (shape.size() == 1) shape.push_back(1);  // one feature per sample
  Tensor x = Tensor::empty(shape, DType::F32);
  float* out = x.data<float>();
  FILE* f = o.file.get();
  std::fseek(f, h.dataOffset, SEEK_SET);
  const int64_t n = h.numel();
  if (h.descr == "<f4") {
    DTRAIN_CHECK(
        std::fread(out, sizeof(float), static_cast<size_t>(n), f) == static_cast<size_t>(n), who,
        ": read error (", std::strerror(errno), ")");
  } else if (h.descr == "<f8") {
    readConverted<double>(f, who, n, out, [](double v, int64_t) { return static_cast<float>(v); });
  } else {
    // A table of i / 255.0f gives bit-identical values to PyTorch's tensor / 255.0.
    std::array<float, 256> scale;
    for (int i = 0; i < 256; ++i) scale[i] = static_cast<float>(i) / 255.0f;
    readConverted<uint8_t>(f, who, n, out, [&](uint8_t v, int64_t) { return scale[v]; });
  }
  return x;
}

std::vector<int32_t> readNpyLabels(const std::string& path, const std::string& name) {
  const std::string who = origin(path, name);
  OpenedNpy o = openNpy(path, who);
  const NpyHeader& h = o.header;
  checkDtype(h, who, "label", {"<i8", "<i4", "|u1"}, "int64 <i8, int32 <i4, uint8 |u1");
  DTRAIN_CHECK_USAGE(h.shape.size() == 1, who,
                     ": labels must be one class index per sample, "
                     "shape (N,), got ",
                     tupleStr(h.shape),
                     h.shape.size() == 2 && h.shape[1] == 1 ? " (save y.ravel())" : "");
  const int64_t n = h.numel();
  std::vector<int32_t> labels(static_cast<size_t>(n));
  FILE* f = o.file.get();
  std::fseek(f, h.dataOffset, SEEK_SET);
  const auto check = [&](int64_t v, int64_t i) {
    DTRAIN_CHECK_USAGE(v >= 0 && v < kMaxClasses, who, ": label ", v, " of sample ", i,
                       v < 0 ? " is negative" : " is out of range",
                       " (class labels are 0, 1, ... below ", kMaxClasses, ")");
    return static_cast<int32_t>(v);
  };
  if (h.descr == "<i8")
    readConverted<int64_t>(f, who, n, labels.data(), check);
  else if (h.descr == "<i4")
    readConverted<int32_t>(f, who, n, labels.data(), check);
  else
    readConverted<uint8_t>(f, who, n, labels.data(), check);
  return labels;
}

NpyHeader parseNpyFeaturesHeader(const uint8_t* pre, size_t size, int64_t totalSize,
                                 const std::string& who) {
  DTRAIN_CHECK_USAGE(size >= 10 && std::memcmp(pre, kMagic, kMagicSize) == 0, who,
                     ": not a .npy array (bad magic)");
  NpyHeader h;
  h.major = pre[6];
  h.minor = pre[7];
  DTRAIN_CHECK_USAGE(h.major >= 1 && h.major <= 3 && h.minor == 0, who,
                     ": unsupported .npy format version ", h.major, ".", h.minor);
  const size_t lenBytes = h.major == 1 ? 2 : 4;
  DTRAIN_CHECK_USAGE(size >= 8 + lenBytes, who, ": truncated .npy header");
  int64_t headerLen = 0;
  for (int b = static_cast<int>(lenBytes) - 1; b >= 0; --b) headerLen = (headerLen << 8) | pre[8 + b];
  h.dataOffset = 8 + static_cast<int64_t>(lenBytes) + headerLen;
  DTRAIN_CHECK_USAGE(h.dataOffset <= static_cast<int64_t>(size), who, ": truncated .npy header (",
                     headerLen, " bytes declared)");
  std::string text(reinterpret_cast<const char*>(pre) + 8 + lenBytes, static_cast<size_t>(headerLen));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  parseDict(text, h, who);
  h.itemSize = itemSizeOf(h.descr);
  checkDtype(h, who, "feature", {"<f4", "<f8", "|u1"}, "float32 <f4, float64 <f8, uint8 |u1");
  int64_t numel = 1;
  for (int64_t d : h.shape) {
    DTRAIN_CHECK_USAGE(d > 0, who, ": empty array (shape ", tupleStr(h.shape), ")");
    numel *= d;
    DTRAIN_CHECK_USAGE(numel <= (int64_t{1} << 32), who, ": shape ", tupleStr(h.shape),
                       " is implausibly large for one sample");
  }
  const int64_t need = numel * h.itemSize, have = totalSize - h.dataOffset;
  DTRAIN_CHECK_USAGE(have == need, who, ": shape ", tupleStr(h.shape), " of '", h.descr,
                     "' needs ", need, " bytes of data, the member holds ", have);
  return h;
}

void npyFeaturesToFloats(const NpyHeader& h, const uint8_t* bytes, float* out) {
  const uint8_t* data = bytes + h.dataOffset;
  const int64_t n = h.numel();
  if (h.descr == "<f4") {
    std::memcpy(out, data, static_cast<size_t>(n) * sizeof(float));
  } else if (h.descr == "<f8") {
    for (int64_t i = 0; i < n; ++i) {
      double v;
      std::memcpy(&v, data + i * 8, 8);
      out[i] = static_cast<float>(v);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(data[i]) / 255.0f;
  }
}

void writeNpy(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape,
              const void* data, size_t bytes, int major, bool fortranOrder) {
  DTRAIN_CHECK(major >= 1 && major <= 3, "writeNpy ", path, ": bad version ", major);
  // A structured dtype's descr is a list, written unquoted as NumPy does.
  const std::string quoted = descr.starts_with('[') ? descr : "'" + descr + "'";
  std::string dict = "{'descr': " + quoted +
                     ", 'fortran_order': " + (fortranOrder ? "True" : "False") +
                     ", 'shape': " + tupleStr(shape) + ", }";
  // NumPy pads the header with spaces and a newline so the data starts 64-byte aligned.
  const size_t lenBytes = major == 1 ? 2 : 4;
  const size_t unpadded = kMagicSize + 2 + lenBytes + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict.push_back('\n');
  std::string out(kMagic, kMagicSize);
  out.push_back(static_cast<char>(major));
  out.push_back('\0');
  for (size_t b = 0; b < lenBytes; ++b) out.push_back(static_cast<char>(dict.size() >> (8 * b)));
  out += dict;
  File f(std::fopen(path.c_str(), "wb"), &std::fclose);
  DTRAIN_CHECK(f != nullptr, "file ", path, ": cannot create (", std::strerror(errno), ")");
  DTRAIN_CHECK(std::fwrite(out.data(), 1, out.size(), f.get()) == out.size() &&
                   (bytes == 0 || std::fwrite(data, 1, bytes, f.get()) == bytes),  // data may be null
               "file ", path, ": write failed (", std::strerror(errno), ")");
}

}  // namespace dtrain::data
