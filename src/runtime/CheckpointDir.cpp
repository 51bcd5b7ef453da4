#include "runtime/CheckpointDir.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include <unistd.h>

#include "core/Error.h"
#include "core/Log.h"
#include "runtime/Safetensors.h"
#include "runtime/TrainConfig.h"

namespace dtrain::runtime {
namespace fs = std::filesystem;

namespace {
const std::regex kName(R"(step-(\d+)\.safetensors)");
}  // namespace

std::string checkpointPath(const std::string& dir, int64_t step) {
  char name[48];
  std::snprintf(name, sizeof name, "step-%09lld.safetensors", static_cast<long long>(step));
  return (fs::path(dir) / name).string();
}

void prepareCheckpointDir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  DTRAIN_CHECK_USAGE(!ec && fs::is_directory(dir), "--checkpoint-dir ", dir,
                     ": cannot create the directory", ec ? " (" + ec.message() + ")" : "");
  // Writable: a probe file, so the run fails now rather than at its first checkpoint.
  // Named by the process: mpirun's ranks share the directory, and with one name a
  // rank removed another's probe before it looked (seen under dtrain launch).
  const fs::path probe = fs::path(dir) / (".dtrain-write-probe-" + std::to_string(::getpid()));
  { std::ofstream(probe) << "ok"; }
  const bool writable = fs::exists(probe);
  fs::remove(probe, ec);
  DTRAIN_CHECK_USAGE(writable, "--checkpoint-dir ", dir, ": not writable");
}

std::vector<std::string> listCheckpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && std::regex_match(name, m, kName))
      found.emplace_back(std::stoll(m[1].str()), e.path().string());
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> out;
  for (auto& [step, path] : found) out.push_back(std::move(path));
  return out;
}

std::string latestLinkPath(const std::string& dir) {
  return (fs::path(dir) / "latest.safetensors").string();
}

void markLatest(const std::string& dir, const std::string& path) {
  // Relative, so that the directory can be moved or copied whole.
  const fs::path link = latestLinkPath(dir);
  const fs::path temp = link.string() + ".tmp-" + std::to_string(::getpid());
  std::error_code ec;
  fs::remove(temp, ec);
  fs::create_symlink(fs::path(path).filename(), temp, ec);
  if (!ec) fs::rename(temp, link, ec);
  if (ec) {
    fs::remove(temp);
    log::warn("could not point ", link.string(), " at ", path, ": ", ec.message());
  }
}

void pruneCheckpoints(const std::string& dir, int keep) {
  const auto all = listCheckpoints(dir);
  for (size_t i = static_cast<size_t>(std::max(keep, 0)); i < all.size(); ++i) {
    std::error_code ec;
    fs::remove(all[i], ec);
    if (ec) log::warn("could not delete old checkpoint ", all[i], ": ", ec.message());
  }
}

namespace {
// Before MPI is up, whether this process is rank 0 of what mpirun or srun started
// (or started alone): the one that says what every rank found.
bool firstLaunchedRank() {
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* rank = std::getenv(v)) return std::string(rank) == "0";
  return true;
}
}  // namespace

void resolveCheckpointFlags(TrainConfig& c) {
  // A named input that is not there is bad usage (exit 2), as for --resume below.
  for (const auto& [flag, path] : {std::pair<const char*, const std::string*>{"--load", &c.load},
                                   {"--load-adapters", &c.loadAdapters}})
    DTRAIN_CHECK_USAGE(path->empty() || fs::is_regular_file(*path), flag, " ", *path,
                       ": no such checkpoint file");
  if (c.resume.empty()) return;
  if (c.resume == "auto") {
    c.load = fs::is_directory(c.checkpointDir) ? latestValidCheckpoint(c.checkpointDir) : "";
    if (c.load.empty() && firstLaunchedRank()) log::info("--resume auto: no checkpoint in ", c.checkpointDir, ": starting fresh");
  } else {
    DTRAIN_CHECK_USAGE(fs::is_regular_file(c.resume), "--resume ", c.resume,
                       ": no such checkpoint (a file, or auto with --checkpoint-dir)");
    c.load = c.resume;
  }
  c.resume.clear();
}

std::string latestValidCheckpoint(const std::string& dir) {
  for (const std::string& path : listCheckpoints(dir)) {
    try {
      loadSafetensors(path);  // reads it whole: a file cut short fails here
      return path;
    } catch (const std::exception& e) {
      log::warn("--resume auto: skipping ", path, ": ", e.what());
    }
  }
  return "";
}

}  // namespace dtrain::runtime
