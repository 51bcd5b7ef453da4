#pragma once
// The files a run writes (--save, --save-adapters, --metrics, --timeline,
// --checkpoint-dir) are checked before it trains: a path that cannot be
// written fails at once with exit code 2 rather than after the last step with
// the result lost.
#include <string>

namespace dtrain::runtime {

struct TrainConfig;

// Throws UsageError naming `flag` and `path` unless `path` can be created or
// overwritten: its directory exists and takes a new file, and it is no directory.
void checkWritableFile(const std::string& flag, const std::string& path);

// Every output of `config`, each by its flag; creates --checkpoint-dir when
// --checkpoint-every is on (prepareCheckpointDir).
void checkOutputPaths(const TrainConfig& config);

}  // namespace dtrain::runtime
