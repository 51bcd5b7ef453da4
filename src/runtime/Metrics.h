#pragma once
// The --metrics file: one JSON object per line (JSON Lines), flushed per record
// so a crashed or interrupted run keeps what it logged.
#include <cstdio>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace dtrain::runtime {

class MetricsWriter {
 public:
  // An empty path disables it; otherwise throws naming the file if it cannot be written.
  explicit MetricsWriter(const std::string& path,
                         std::function<void(const nlohmann::json&)> sink = {});
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  bool enabled() const { return file_ != nullptr || sink_; }
  void write(const nlohmann::json& record);

 private:
  FILE* file_ = nullptr;
  std::string path_;
  std::function<void(const nlohmann::json&)> sink_;  // also sees every record
};

}  // namespace dtrain::runtime
