#pragma once
// Alpha-beta fits of point-to-point messages and of the collectives, measured
// by every rank of a communicator (threads of the local backend, or processes
// under mpirun, on one host or on emulated ones).
//
// The message size b of a collective is the whole vector, whatever the
// collective: allreduce's and broadcast's buffer, allgather's output (each
// rank gives b/n), reduce-scatter's input (each rank keeps b/n). So one model
// size in bytes reads the same in every fit.
#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calibrate/Fit.h"
#include "comm/Communicator.h"

namespace dtrain::calibrate {

struct ProbeConfig {
  std::vector<size_t> sizes;    // message sizes in bytes (multiples of 4)
  int ranksPerHost = 1;         // the point-to-point partner of rank 0 is rank ranksPerHost
                                // (the first rank of the next host); hier groups this many
  double secondsPerRun = 0.02;  // calls per timed run: about this long (at least 1 call)
  int runs = 3;                 // timed runs per size; the median is kept
  double spreadForMoreRuns = 1.1;  // when their slowest is this much above their fastest,
  int moreRuns = 0;                // this many runs more (0: none)
  bool pointToPoint = true;
  bool hier = false;            // also the hierarchical allreduce (groups of ranksPerHost)
  bool hierOnly = false;        // only that one
};

struct CollectiveFit {
  std::string name;             // "allreduce_ring", "allreduce_hier", "allgather_ring", ...
  int ranks = 0, ranksPerHost = 0;
  AlphaBeta fit;
  std::vector<Sample> samples;
};

struct ProbeResult {
  AlphaBeta pointToPoint;       // one way, rank 0 to its partner (ping-pong / 2)
  std::vector<Sample> pointToPointSamples;
  std::vector<CollectiveFit> collectives;
};

// Collective over `comm`: every rank calls it with the same config; the
// result is complete on rank 0 (timings are the slowest rank's).
ProbeResult probeComm(comm::Communicator& comm, const ProbeConfig& config);

// {"point_to_point": {...}, "collectives": {"allreduce_ring": {...}, ...}}:
// the fits with their samples, as the internal MPI runs hand them back.
nlohmann::json toJson(const ProbeResult& result);
ProbeResult probeFromJson(const nlohmann::json& j);
// [[bytes, seconds], ...]
nlohmann::json samplesJson(const std::vector<Sample>& samples);

// minBytes, 4 minBytes, 16 minBytes, ... up to maxBytes (at least two sizes).
std::vector<size_t> messageSizes(size_t minBytes, size_t maxBytes);

}  // namespace dtrain::calibrate
