#pragma once
// --checkpoint-every N --checkpoint-dir D [--keep-checkpoints k] and --resume:
// D holds step-<000000123>.safetensors files (the step zero-padded, so names
// sort by step), each written atomically (saveCheckpoint: temporary file, then
// rename), the newest k kept. `--resume auto` picks the newest one that reads
// back whole, skipping (with a warning) a newest file that was cut short, so a
// job killed while writing resumes from the one before.
#include <cstdint>
#include <string>
#include <vector>

namespace dtrain::runtime {

// D/step-<step>.safetensors.
std::string checkpointPath(const std::string& dir, int64_t step);
// Creates D if needed; throws UsageError naming it when it cannot be made or written.
void prepareCheckpointDir(const std::string& dir);
// The checkpoints in D, newest first (by the step in the name).
std::vector<std::string> listCheckpoints(const std::string& dir);
// D/latest.safetensors: a symbolic link to the checkpoint D's newest, `path`
// (replaced atomically), for --load and for people.
std::string latestLinkPath(const std::string& dir);
void markLatest(const std::string& dir, const std::string& path);
// Deletes all but the newest `keep`.
void pruneCheckpoints(const std::string& dir, int keep);
// The newest checkpoint in D whose file reads back (safetensors header and
// sizes); "" when there is none. Warns about every newer one it skips.
std::string latestValidCheckpoint(const std::string& dir);

struct TrainConfig;
// --load and --load-adapters must name files (UsageError). --resume: `auto` becomes the newest valid checkpoint of --checkpoint-dir in
// config.load (none there: a fresh start, said on stderr), a path becomes
// config.load after checking it exists; config.resume is then cleared.
// (--checkpoint-dir is made ready with the other outputs: runtime/OutputPaths.h.)
void resolveCheckpointFlags(TrainConfig& config);

}  // namespace dtrain::runtime
