#include "runtime/Safetensors.h"

#include "runtime/AtomicFile.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>

namespace dtrain::runtime {

// The format is little-endian; tensors are written and read as raw host bytes.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

using dtrain::detail::concat;

namespace {

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference implementation's limit
constexpr const char* kMetadataKey = "__metadata__";

std::string errnoStr() { return std::strerror(errno); }

class ReadFile {
 public:
  explicit ReadFile(const std::string& path) : path_(path) {
    std::error_code ec;
    DTRAIN_CHECK(!std::filesystem::is_directory(path, ec), "file ", path,
                 ": is a directory, not a safetensors file");
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    DTRAIN_CHECK(fd_ >= 0, "file ", path, ": cannot open (", errnoStr(), ")");
    struct stat st {};
    DTRAIN_CHECK(::fstat(fd_, &st) == 0, "file ", path, ": cannot stat (", errnoStr(), ")");
    size_ = static_cast<uint64_t>(st.st_size);
  }
  ~ReadFile() { ::close(fd_); }
  ReadFile(const ReadFile&) = delete;
  ReadFile& operator=(const ReadFile&) = delete;

  uint64_t size() const { return size_; }

  void read(uint64_t offset, void* out, uint64_t bytes) {
    char* p = static_cast<char*>(out);
    while (bytes > 0) {
      const ssize_t n = ::pread(fd_, p, std::min<uint64_t>(bytes, uint64_t{1} << 30),
                                static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      DTRAIN_CHECK(n >= 0, "file ", path_, ": read error (", errnoStr(), ")");
      DTRAIN_CHECK(n > 0, "file ", path_, ": unexpected end of file at byte ", offset);
      p += n;
      offset += static_cast<uint64_t>(n);
      bytes -= static_cast<uint64_t>(n);
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

// Parses and checks one tensor entry of the header against the data size.
Entry parseEntry(const std::string& path, const std::string& name, const nlohmann::json& j,
                 uint64_t dataBytes) {
  auto fail = [&](const auto&... why) {
    throw Error(concat("file ", path, ": tensor '", name, "': ", why...));
  };
  if (!j.is_object()) fail("header entry is not an object");
  Entry e{name, DType::F32, {}, 0, 0};

  auto dt = j.find("dtype");
  if (dt == j.end() || !dt->is_string()) fail("missing \"dtype\" string");
  const std::string dtype = dt->get<std::string>();
  bool known = false;
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U8}) {
    if (dtype == dtypeName(t)) {
      e.dtype = t;
      known = true;
    }
  }
  if (!known) fail("unknown dtype '", dtype, "' (supported: F32, F16, BF16, I32, I64, U8)");

  auto sh = j.find("shape");
  if (sh == j.end() || !sh->is_array()) fail("missing \"shape\" array");
  // Bounded dims keep numel * element size from overflowing before the size check.
  uint64_t numel = 1;
  for (const auto& d : *sh) {
    if (!d.is_number_unsigned()) fail("shape ", sh->dump(), " has a dimension that is not a non-negative integer");
    const uint64_t v = d.get<uint64_t>();
    if (v > (uint64_t{1} << 40) || (v != 0 && numel > (uint64_t{1} << 40) / v))
      fail("shape ", sh->dump(), " is too large");
    numel *= v;
    e.shape.push_back(static_cast<int64_t>(v));
  }

  auto off = j.find("data_offsets");
  if (off == j.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
      !(*off)[1].is_number_unsigned())
    fail("\"data_offsets\" must be two non-negative integers [begin, end]");
  e.begin = (*off)[0].get<uint64_t>();
  e.end = (*off)[1].get<uint64_t>();
  if (e.begin > e.end) fail("data_offsets [", e.begin, ", ", e.end, "] end before they begin");
  if (e.end > dataBytes)
    fail("data_offsets [", e.begin, ", ", e.end, "] out of range: the data section holds ",
         dataBytes, " bytes");
  const uint64_t want = numel * dtypeSize(e.dtype);
  if (e.end - e.begin != want)
    fail("data_offsets [", e.begin, ", ", e.end, "] span ", e.end - e.begin, " bytes but shape ",
         shapeStr(e.shape), " of ", dtype, " needs ", want);
  return e;
}

}  // namespace

const Tensor* SafetensorsFile::find(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

void saveSafetensors(const std::string& path,
                     const std::vector<std::pair<std::string, Tensor>>& tensors,
                     const std::map<std::string, std::string>& metadata) {
  // Validate everything before creating any file.
  std::set<std::string> seen;
  for (const auto& [name, t] : tensors) {
    DTRAIN_CHECK(!name.empty(), "saving ", path, ": a tensor has an empty name");
    DTRAIN_CHECK(name != kMetadataKey, "saving ", path, ": '", kMetadataKey,
                 "' is reserved and cannot name a tensor");
    DTRAIN_CHECK(seen.insert(name).second, "saving ", path, ": duplicate tensor name '", name, "'");
    DTRAIN_CHECK(t.defined(), "saving ", path, ": tensor '", name, "' is undefined");
    DTRAIN_CHECK(t.device().type == DeviceType::CPU, "saving ", path, ": tensor '", name,
                 "' is on ", t.device().str(), "; only CPU tensors can be saved");
  }

  // Larger elements first: with the data section starting 8-aligned, every
  // tensor then starts at a multiple of its element size.
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return dtypeSize(tensors[a].second.dtype()) > dtypeSize(tensors[b].second.dtype());
  });

  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  uint64_t offset = 0;
  for (size_t i : order) {
    const auto& [name, t] = tensors[i];
    const uint64_t bytes = t.nbytes();
    header[name] = {{"dtype", dtypeName(t.dtype())},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    throw Error(concat("saving ", path, ": cannot encode the header (names and metadata must be UTF-8): ", e.what()));
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t headerLen = text.size();

  AtomicFile out(path);  // a failure leaves `path` as it was
  out.write(&headerLen, sizeof headerLen);
  out.write(text.data(), text.size());
  for (size_t i : order) {
    const Tensor c = tensors[i].second.contiguous();
    out.write(c.rawData(), c.nbytes());
  }
  out.commit();
}

SafetensorsFile loadSafetensors(const std::string& path) {
  ReadFile in(path);
  const uint64_t size = in.size();
  DTRAIN_CHECK(size >= 8, "file ", path, ": too short for a safetensors file (", size,
               " bytes; the header length alone takes 8)");
  uint64_t headerLen = 0;
  in.read(0, &headerLen, 8);
  DTRAIN_CHECK(headerLen <= size - 8, "file ", path, ": header length ", headerLen,
               " goes beyond the file size (", size, " bytes): truncated or not a safetensors file");
  DTRAIN_CHECK(headerLen <= kMaxHeaderBytes, "file ", path, ": header length ", headerLen,
               " exceeds the ", kMaxHeaderBytes, "-byte limit");
  std::string text(headerLen, '\0');
  in.read(8, text.data(), headerLen);

  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(concat("file ", path, ": bad JSON header (", e.what(), ")"));
  }
  DTRAIN_CHECK(header.is_object(), "file ", path, ": the JSON header is not an object");

  const uint64_t dataStart = 8 + headerLen;
  const uint64_t dataBytes = size - dataStart;
  SafetensorsFile file;
  std::vector<Entry> entries;
  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey) {
      DTRAIN_CHECK(value.is_object(), "file ", path, ": \"", kMetadataKey, "\" is not an object");
      for (const auto& [mk, mv] : value.items()) {
        DTRAIN_CHECK(mv.is_string(), "file ", path, ": metadata '", mk,
                     "' is not a string (safetensors metadata maps strings to strings)");
        file.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    entries.push_back(parseEntry(path, key, value, dataBytes));
  }

  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (size_t i = 1; i < entries.size(); ++i) {
    const Entry& p = entries[i - 1];
    const Entry& e = entries[i];
    DTRAIN_CHECK(e.begin >= p.end, "file ", path, ": tensors '", p.name, "' [", p.begin, ", ",
                 p.end, ") and '", e.name, "' [", e.begin, ", ", e.end, ") overlap");
  }

  file.tensors.reserve(entries.size());
  for (const Entry& e : entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    in.read(dataStart + e.begin, t.rawData(), e.end - e.begin);
    file.tensors.emplace_back(e.name, std::move(t));
  }
  return file;
}

}  // namespace dtrain::runtime
