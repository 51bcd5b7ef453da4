#pragma once
// The machine file (docs/guide/calibrate.md, the format `dtrain simulate` and
// `dtrain plan` read): assembled from the measurements, checked, and written
// whole or not at all.
#include <string>

#include <nlohmann/json.hpp>

#include "calibrate/CommProbe.h"
#include "calibrate/Compute.h"
#include "calibrate/ModelTiming.h"

namespace dtrain::calibrate {

inline constexpr const char* kMachineFormat = "dtrain-machine-1";

// {"alpha_s": .., "bytes_per_s": ..}
nlohmann::json linkJson(const AlphaBeta& fit);
// {"fp32": .., "bf16": ..} under "flops_per_s", and "memory_bytes_per_s".
nlohmann::json computeJson(const ComputeRates& rates);
// One micro-batch's entry under models.<name>.micro_batches.
nlohmann::json modelTimesJson(const ModelTimes& times);
// The collectives of one probe under a link kind: {"allreduce_ring": {ranks, ranks_per_host,
// alpha_s, bytes_per_s}, ...}.
nlohmann::json collectivesJson(const ProbeResult& probe);

// Throws dtrain::Error naming the first key that is missing, not a positive
// finite number (times, rates, sizes, counts; activation bytes and a layer's
// times may be 0), or not allowed at the top level.
void checkMachineJson(const nlohmann::json& machine);

// Checks, then writes `machine` (indented) to `path` atomically (runtime/AtomicFile.h).
void writeMachineFile(const nlohmann::json& machine, const std::string& path);

}  // namespace dtrain::calibrate
