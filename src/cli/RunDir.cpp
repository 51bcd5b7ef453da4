#include "cli/RunDir.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "api/RunConfig.h"
#include "core/Error.h"
#include "runtime/AtomicFile.h"
#include "runtime/OutputPaths.h"

namespace dtrain::cli {
namespace fs = std::filesystem;

namespace {

void writeWhole(const fs::path& path, const std::string& text) {
  runtime::AtomicFile f(path.string(), "writing");
  f.write(text.data(), text.size());
  f.commit();
}

}  // namespace

bool firstProcessOfJob() {
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* r = std::getenv(v)) return std::atoi(r) == 0;
  return true;
}

RunDir::RunDir(const RunDirRequest& request, api::RunConfig& rc) : dir_(request.dir) {
  if (dir_.empty()) {
    DTRAIN_CHECK_USAGE(!request.timeline, "--run-timeline writes into --run-dir DIR: give it too");
    return;
  }
  DTRAIN_CHECK_USAGE(rc.train.metrics.empty(), "--metrics ", rc.train.metrics,
                     " conflicts with --run-dir ", dir_, ", which writes ", dir_,
                     "/metrics.jsonl: give one of them");
  DTRAIN_CHECK_USAGE(rc.train.timeline.empty(), "--timeline ", rc.train.timeline,
                     " conflicts with --run-dir ", dir_,
                     ": --run-timeline writes its timeline into it; give one of them");
  std::error_code ec;
  DTRAIN_CHECK_USAGE(!fs::exists(dir_, ec) || fs::is_directory(dir_, ec), "--run-dir ", dir_,
                     ": is a file, not a directory");
  fs::create_directories(dir_, ec);
  DTRAIN_CHECK_USAGE(!ec, "--run-dir ", dir_, ": cannot create it (", ec.message(), ")");
  rc.train.metrics = (fs::path(dir_) / "metrics.jsonl").string();
  if (request.timeline) rc.train.timeline = (fs::path(dir_) / "timeline.json").string();
  runtime::checkWritableFile("--run-dir", rc.train.metrics);
  writesSharedFiles_ = firstProcessOfJob();
  // A result of an earlier run in this directory would read as this run's end.
  if (writesSharedFiles_) fs::remove(fs::path(dir_) / "result.json", ec);
}

void RunDir::writeStart(const std::string& configToml, const std::string& machineFile) const {
  if (!enabled() || !writesSharedFiles_) return;
  writeWhole(fs::path(dir_) / "config.toml", configToml);
  if (machineFile.empty()) return;
  std::ifstream in(machineFile, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  writeWhole(fs::path(dir_) / "machine.json", text.str());
}

void RunDir::writeResult(const nlohmann::json& result) const {
  if (!enabled() || !writesSharedFiles_ || result.is_null()) return;
  writeWhole(fs::path(dir_) / "result.json", result.dump() + "\n");
}

}  // namespace dtrain::cli
