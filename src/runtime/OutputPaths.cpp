#include "runtime/OutputPaths.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <utility>

#include "core/Error.h"
#include "runtime/CheckpointDir.h"
#include "runtime/TrainConfig.h"

namespace dtrain::runtime {
namespace fs = std::filesystem;

void checkWritableFile(const std::string& flag, const std::string& path) {
  std::error_code ec;
  const fs::path file(path);
  DTRAIN_CHECK_USAGE(!fs::is_directory(file, ec), flag, " ", path, ": is a directory, not a file");
  const fs::path dir = file.parent_path().empty() ? fs::path(".") : file.parent_path();
  DTRAIN_CHECK_USAGE(fs::is_directory(dir, ec), flag, " ", path, ": no directory ", dir.string());
  // Writable: a probe file beside it (named by the process, so mpirun's ranks
  // checking the same path do not remove each other's), as the writers write a
  // temporary file there and rename it.
  const fs::path probe =
      dir / (".dtrain-probe-" + std::to_string(::getpid()) + "-" + file.filename().string());
  { std::ofstream(probe) << "ok"; }
  const bool writable = fs::exists(probe, ec);
  fs::remove(probe, ec);
  DTRAIN_CHECK_USAGE(writable, flag, " ", path, ": cannot write in ", dir.string());
}

void checkOutputPaths(const TrainConfig& c) {
  const std::pair<const char*, const std::string*> files[] = {
      {"--save", &c.save},
      {"--save-adapters", &c.saveAdapters},
      {"--metrics", &c.metrics},
      {"--timeline", &c.timeline}};
  for (const auto& [flag, path] : files)
    if (!path->empty()) checkWritableFile(flag, *path);
  if (!c.checkpointDir.empty()) prepareCheckpointDir(c.checkpointDir);
  if (!c.tensorboard.empty()) {
    std::error_code ec;
    fs::create_directories(c.tensorboard, ec);
    DTRAIN_CHECK_USAGE(fs::is_directory(c.tensorboard, ec), "--tensorboard ", c.tensorboard,
                       ": cannot create the directory");
    checkWritableFile("--tensorboard", (fs::path(c.tensorboard) / "events.out.tfevents").string());
  }
}

}  // namespace dtrain::runtime
