#pragma once
// `dtrain calibrate`: measures this machine (compute, memory, dtrain's models,
// every link kind and collective the ranks use) and returns the machine file
// (calibrate/MachineFile.h) that `dtrain simulate` and `dtrain plan` read.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dtrain::calibrate {

struct CalibrateConfig {
  std::vector<std::string> models{"gpt-small", "mlp"};
  // Sizes to time each model at; empty: 1, 2, 4, ... 256, up to the first whose
  // forward and backward take over autoStopSeconds (the simulator reads a size
  // between two measured ones off the line between them, and one past the
  // largest in proportion: a small model's sample gets cheaper as the batch
  // grows, a large model's costs the same from 1 on).
  std::vector<int64_t> microBatches;
  double autoStopSeconds = 0.05;
  int threads = 1;                   // kernel threads per device (a rank)
  std::string precision = "fp32";    // the models' (GEMM rates are measured for both)
  int repeats = 5;                   // timed steps per model and micro-batch
  size_t maxBytes = size_t{16} << 20;  // largest message on this host (4 KiB upwards)
  bool mpi = true;                   // processes on this host over MPI (intra_host)
  bool small = false;                // tiny GEMM and stream sizes (tests)
  int netsimHosts = 0;               // > 0: emulated hosts (scripts/netsim.sh)
  std::string rate;                  // their link rate, e.g. 100mbit
  std::vector<std::string> hosts;    // real hosts (mpirun --host), instead of netsim
  int devicesPerHost = 0;            // 0: this machine's cores (--netsim: divided among the hosts)
  std::string self;                  // the dtrain binary, for mpirun
  std::string netsimScript;          // scripts/netsim.sh
  std::string lockFile = "/tmp/netsim.lock";
  std::string samplesFile;           // also write the measured (bytes, seconds) points here
  // An earlier machine file whose hosts, links and collectives are kept: only
  // compute and the models are measured (seconds, no network), for a model
  // added later or a machine whose speed has moved since.
  std::string fromFile;
};

// Throws UsageError for a bad configuration (unknown model or precision,
// micro-batch < 1, --netsim without --rate, --netsim with --hosts, ...).
void validate(const CalibrateConfig& config);

// Runs every measurement, one progress line each on stderr; returns the
// machine file's JSON (checked). Failures while running throw dtrain::Error.
nlohmann::json runCalibrate(const CalibrateConfig& config);

// The rank's side of the MPI measurements (`dtrain calibrate --internal-comm
// FILE` under mpirun): probes the mpi world; rank 0 writes the fits to FILE.
void runCommRank(const std::string& outFile, const std::vector<size_t>& sizes, int ranksPerHost);

// Link rate in bytes/s of a tc rate ("100mbit", "1gbit", "12.5mbps"); 0 when unreadable.
double rateBytesPerS(const std::string& rate);

}  // namespace dtrain::calibrate
