#pragma once
// Settings of a parameter-server run, shared by servers and workers.
#include <cstdint>
#include <string>

#include "comm/CollectiveTypes.h"
#include "parallel/compress/Compressor.h"
#include "optim/Factory.h"

namespace dtrain::parallel::ps {

enum class Consistency { Sync, Async, Ssp };
Consistency consistencyFromName(const std::string& name);
const char* consistencyName(Consistency c);

// Seconds (flags, options) as the communication layer's timeout type.
inline comm::Millis seconds(double s) { return comm::Millis(static_cast<int64_t>(s * 1000)); }

struct PsOptions {
  int servers = 1;                 // ranks 0..servers-1
  int workers = 1;                 // ranks servers..servers+workers-1
  Consistency consistency = Consistency::Sync;
  int64_t staleness = 0;           // ssp bound
  int backupWorkers = 0;           // sync: late gradients dropped per step
  int64_t pushEvery = 1;           // async: steps accumulated per push
  int64_t fetchEvery = 1;          // async: steps between fetches
  double timeoutS = 60;            // silence (no message, no heartbeat) before a peer is dead
  // Servers: the optimizer they run (by name, as --optimizer).
  std::string optimizer = "sgd";
  optim::OptimizerOptions optimizerOptions;
  // ssp: refresh the parameters every fetchEvery steps, blocking only when the
  // slowest worker is more than `staleness` steps behind (eager, ESSP as in
  // Petuum's Bosen); lazy: fetch only when the cached parameters are too stale.
  bool sspEagerReads = true;
  // --compress on the pushes (parallel/ps/PushCodec.h); "none": fp32.
  compress::CompressOptions compress;
  // --clip-grad-norm (0: off). Sync: the servers clip the step's mean gradient
  // by its global norm (their shards' squares exchanged); async and ssp: each
  // worker clips its own gradient before pushing it (each push is one step).
  double clipGradNorm = 0;
  // Fault injection: this rank stops answering at this step (worker) or after
  // this many updates (server); -1: never.
  int64_t killAt = -1;
  // Fault injection (worker): after its push of this step it goes silent,
  // heartbeats too, until every server has declared it dead; then it reads
  // its replies and carries on. -1: never.
  int64_t pauseAt = -1;

  int workerRank(int worker) const { return servers + worker; }
};

}  // namespace dtrain::parallel::ps
