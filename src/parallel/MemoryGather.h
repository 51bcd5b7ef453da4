#pragma once
// memory_per_rank (the final JSON line): every rank's accounting domain
// (core/Memory.h) gathered to the reporter, the same figures for every
// strategy so that strategies can be compared.
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/Communicator.h"
#include "core/Memory.h"

namespace dtrain::parallel {

// Collective over `comm`: every rank's figures, in rank order, on every rank.
std::vector<memory::RankMemory> allgatherMemory(comm::Communicator& comm,
                                                const memory::RankMemory& mine);

// [{"parameters", "gradients", "optimizer_state", "activations_peak", "peak"}, ...]
nlohmann::json memoryPerRankJson(const std::vector<memory::RankMemory>& ranks);

}  // namespace dtrain::parallel
