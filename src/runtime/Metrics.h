#pragma once
// The --metrics file: one JSON object per line (JSON Lines), flushed per record
// so a crashed or interrupted run keeps what it logged.
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

namespace dtrain::runtime {

class MetricsWriter {
 public:
  // An empty path disables it; otherwise throws naming the file if it cannot be written.
  explicit MetricsWriter(const std::string& path);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  bool enabled() const { return file_ != nullptr; }
  void write(const nlohmann::json& record);

 private:
  FILE* file_ = nullptr;
  std::string path_;
};

}  // namespace dtrain::runtime
