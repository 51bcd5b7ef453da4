#include "runtime/Metrics.h"

#include <cerrno>
#include <cstring>

#include "core/Error.h"

namespace dtrain::runtime {

MetricsWriter::MetricsWriter(const std::string& path, std::function<void(const nlohmann::json&)> sink)
    : path_(path), sink_(std::move(sink)) {
  if (path.empty()) return;
  file_ = std::fopen(path.c_str(), "w");
  if (!file_) throw Error("cannot write metrics file " + path + ": " + std::strerror(errno));
}

MetricsWriter::~MetricsWriter() {
  if (file_) std::fclose(file_);
}

void MetricsWriter::write(const nlohmann::json& record) {
  if (sink_) sink_(record);
  if (!file_) return;
  std::string line = record.dump();
  line.push_back('\n');
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0)
    throw Error("writing metrics file " + path_ + " failed: " + std::strerror(errno));
}

}  // namespace dtrain::runtime
