#pragma once
// What a rank's compute loses when ranks outnumber the cores beyond the
// arithmetic share: K processes on C cores each compute at C / K of one alone
// and a little less (the switches between them, the caches they evict).
// calibrate starts 2x as many processes
// as cores, each timing the same model steps in one window of the system
// clock, against the step alone; the machine file keeps the ratio
// (models.M.shared_slowdown) and the simulator slows oversubscribed ranks by it.
// The step alone is the model profile's at that size (forward + backward +
// update, the median of calibrate's passes), the time the simulator scales, so
// that a shared step is predicted as measured: a process timed alone beside
// the shared ones is a short, noisy run, and a ratio against it would move
// with that run's noise on top of the profile's own.
#include <cstdint>
#include <string>
#include <vector>

namespace dtrain::calibrate {

struct CoreSharingConfig {
  std::string self;            // the dtrain binary
  std::string model;
  int64_t microBatch = 4;
  int threads = 1;             // kernel threads per process
  std::string precision = "fp32";
  double aloneStepS = 0;        // the profile's step at microBatch (> 0)
  double windowS = 1.0;        // seconds of timed steps per run (its window)
  int rounds = 3;              // runs of all the processes at once (their median)
};

struct CoreSharing {
  int processes = 0;           // at once on the cores
  double share = 1;            // processes x threads / cores
  double sharedS = 0;          // the same with `processes` at once (their median)
  double slowdown = 1;         // sharedS / (aloneStepS x share), at least 1
};

// Runs the processes (this binary's `calibrate --internal-share`); throws
// dtrain::Error when one fails.
CoreSharing measureCoreSharing(const CoreSharingConfig& config, int cores);

// What computing ranks lose to ranks beside them that wait for a message,
// where ranks outnumber the cores: Open MPI waits by polling, and with
// mpi_yield_when_idle (which netsim.sh mpirun sets when the ranks outnumber
// the cores) a waiting rank yields its core between polls but stays runnable
// throughout, so the scheduler keeps switching to it: a pipeline stage
// computing alone still shares its core with the waiting ones. calibrate starts
// 2x as many MPI processes as cores (cores / threads of them computing, the
// rest waiting in a sum until they end) and times the computing ones'
// steps against the step alone (models.M.waiting_slowdown); the simulator
// weighs a pipeline's waiting ranks on the cores by it (plan::waitingWeight).
struct WaitingSharing {
  int processes = 0, computing = 0;
  double sharedS = 0;          // the computing processes' step (their median)
  double slowdown = 1;         // sharedS / aloneStepS, at least 1
};
// Runs `mpirun -np processes` of this binary's `calibrate --internal-wait-share`;
// throws dtrain::Error when it fails.
WaitingSharing measureWaitingSharing(const CoreSharingConfig& config, int cores);
// One MPI rank's side: ranks below `computing` time model steps in one window
// of `windowS` seconds, the rest wait in a sum for their times; rank 0
// writes the computing ranks' median step seconds to `outFile`.
void runWaitingShareRank(const std::string& outFile, const std::string& model, int64_t microBatch, int threads,
                         const std::string& precision, int computing, double windowS);

// What a sum between two ranks of one host costs on top of its own time where
// ranks outnumber the cores: a tensor-parallel pair meets after each layer,
// and the partner it waits for may be waiting for a core. Pairs of processes
// (`mpirun -np 2 dtrain bench allreduce --busy-ms`: 64 KiB after computeMs of
// compute, the same work whatever the share) fill the cores 2 and 4 ranks a
// core; each wait is their sum's time less one pair's alone. The wait grows
// with the ranks a core (a partner is more often off its core) and with the
// compute between sums (the partner has used up more of its slice).
struct PairedSumConfig {
  std::string self;            // the dtrain binary
  double computeMs = 1;        // before each sum: about a gpt-small layer's compute at tp 2
  int iters = 200, runs = 3;   // sums per timed run, runs (the bench's median)
};
struct PairedSumWait {
  double ranksPerCore = 0;
  double seconds = 0;          // beyond the sum's time alone, at least 0
};
// Empty where the machine has a single core (one pair alone already shares it).
std::vector<PairedSumWait> measurePairedSumWaits(const PairedSumConfig& config, int cores);

// One process's side: runs steps through [startS, endS] (seconds since the
// epoch) and writes their wall-clock seconds a step to `outFile` (a median of
// steps would miss the slices the process waited for its core: a short
// step mostly fits between two).
void runShareRank(const std::string& outFile, const std::string& model, int64_t microBatch, int threads,
                  const std::string& precision, double startS, double endS);

}  // namespace dtrain::calibrate
