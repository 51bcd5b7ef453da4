#include "runtime/TensorBoard.h"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>

#include "core/Error.h"

namespace dtrain::runtime {

namespace {

// The table of the reflected Castagnoli polynomial, one byte at a time.
std::array<uint32_t, 256> crc32cTable() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}

// Protocol-buffer wire format: the few field kinds an Event with scalars needs.
void varint(std::string& out, uint64_t v) {
  for (; v >= 0x80; v >>= 7) out.push_back(static_cast<char>((v & 0x7F) | 0x80));
  out.push_back(static_cast<char>(v));
}
void key(std::string& out, int field, int wireType) { varint(out, (uint64_t(field) << 3) | wireType); }
template <typename T>
void littleEndian(std::string& out, T v) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));  // x86 and ARM Linux: little-endian, as the format
  out.append(bytes, sizeof(T));
}
void bytesField(std::string& out, int field, std::string_view bytes) {
  key(out, field, 2);
  varint(out, bytes.size());
  out.append(bytes);
}

double wallTime() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

// Event{wall_time, step, ...}: the header of every event.
std::string eventHeader(double wall, int64_t step) {
  std::string e;
  key(e, 1, 1);
  littleEndian(e, wall);
  key(e, 2, 0);
  varint(e, static_cast<uint64_t>(step));
  return e;
}

std::string hostName() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) return "localhost";
  return host;
}

}  // namespace

uint32_t crc32c(std::string_view bytes) {
  static const std::array<uint32_t, 256> table = crc32cTable();
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : bytes) c = table[(c ^ b) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t maskedCrc32c(std::string_view bytes) {
  const uint32_t c = crc32c(bytes);
  return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  path_ = dir + "/events.out.tfevents." + std::to_string(static_cast<int64_t>(wallTime())) + "." +
          hostName() + "." + std::to_string(::getpid()) + ".dtrain";
  file_ = std::fopen(path_.c_str(), "wb");
  if (!file_) throw Error("cannot write TensorBoard file " + path_ + ": " + std::strerror(errno));
  std::string first = eventHeader(wallTime(), 0);
  bytesField(first, 3, "brain.Event:2");  // file_version: what readers check first
  writeRecord(first);
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_) std::fclose(file_);
}

void TensorBoardWriter::write(const nlohmann::json& record) {
  // Federated runs count rounds where the others count steps.
  const char* stepKey = record.contains("step") ? "step" : "round";
  if (!record.is_object() || !record.contains(stepKey) || !record[stepKey].is_number()) return;
  std::string summary;
  for (const auto& [tag, v] : record.items()) {
    if (!v.is_number() || tag == stepKey) continue;
    std::string value;
    bytesField(value, 1, tag);
    key(value, 2, 5);  // simple_value: a float, as TensorBoard keeps scalars
    littleEndian(value, static_cast<float>(v.get<double>()));
    bytesField(summary, 1, value);
  }
  if (summary.empty()) return;
  std::string event = eventHeader(wallTime(), record[stepKey].get<int64_t>());
  bytesField(event, 5, summary);
  writeRecord(event);
}

void TensorBoardWriter::writeRecord(const std::string& event) {
  std::string frame;
  const uint64_t length = event.size();
  littleEndian(frame, length);
  const uint32_t lengthCrc = maskedCrc32c(frame);
  littleEndian(frame, lengthCrc);
  frame += event;
  littleEndian(frame, maskedCrc32c(event));
  if (std::fwrite(frame.data(), 1, frame.size(), file_) != frame.size() || std::fflush(file_) != 0)
    throw Error("writing TensorBoard file " + path_ + " failed: " + std::strerror(errno));
}

std::function<void(const nlohmann::json&)> withTensorBoard(
    const std::string& dir, std::function<void(const nlohmann::json&)> next) {
  if (dir.empty()) return next;
  auto writer = std::make_shared<TensorBoardWriter>(dir);
  return [writer, next = std::move(next)](const nlohmann::json& record) {
    writer->write(record);
    if (next) next(record);
  };
}

}  // namespace dtrain::runtime
