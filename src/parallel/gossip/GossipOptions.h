#pragma once
// --strategy gossip's options ([gossip] in config files), kept in the run
// configuration by type (TrainConfig::strategyOptions.get<GossipOptions>()).
#include <cstdint>
#include <string>

namespace dtrain::parallel::gossip {

struct GossipOptions {
  std::string topology = "ring";  // ring, torus, exponential or complete (Topology.h)
  int64_t every = 1;              // optimizer steps between two gossip rounds
};

}  // namespace dtrain::parallel::gossip
