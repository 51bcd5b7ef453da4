#pragma once
// --tensorboard DIR: the metrics records as TensorBoard event files, written
// directly (no TensorFlow): TFRecord framing (uint64 length, masked CRC32C of the
// length, the bytes, masked CRC32C of the bytes) around `Event` protocol buffers
// (tensorflow/core/util/event.proto: wall_time = 1, step = 2, file_version = 3,
// summary = 5; summary.proto: Summary.value = 1, Value.tag = 1, simple_value = 2),
// encoded by hand. Each record's numbers become scalars tagged by their key at
// its step (a federated run's: its round); records without one (the strategy's
// report) are left out.
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace dtrain::runtime {

// CRC-32C (Castagnoli), as TFRecord frames use it.
uint32_t crc32c(std::string_view bytes);
// TFRecord's masked form of a CRC (so a CRC of CRCs does not degenerate).
uint32_t maskedCrc32c(std::string_view bytes);

class TensorBoardWriter {
 public:
  // Creates DIR if needed and a file events.out.tfevents.<seconds>.<host>.<pid>
  // in it; throws naming the file if it cannot.
  explicit TensorBoardWriter(const std::string& dir);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // One Event with a scalar per number of `record` (flushed: TensorBoard reads
  // files as they grow).
  void write(const nlohmann::json& record);
  const std::string& path() const { return path_; }

 private:
  void writeRecord(const std::string& event);
  FILE* file_ = nullptr;
  std::string path_;
};

// The metrics sink of a run with --tensorboard DIR: the records go to a writer in
// DIR and then to `next` (empty DIR: `next` alone).
std::function<void(const nlohmann::json&)> withTensorBoard(
    const std::string& dir, std::function<void(const nlohmann::json&)> next);

}  // namespace dtrain::runtime
