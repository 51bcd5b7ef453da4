#pragma once
// What the mesh strategies (PipelineParallel, TensorParallel) share about
// their data-parallel dimension: a dp strategy (DataParallel, compressed or
// not, or ZeRO 1/2; null when dp = 1) that combines the gradients of the ranks
// holding the same part of the model.
#include <set>
#include <string>
#include <vector>

#include "comm/Communicator.h"
#include "nn/Module.h"
#include "optim/Optimizer.h"
#include "parallel/Strategy.h"

namespace dtrain::parallel {

// The pieces of `modules`' gradients the update reads: the dp strategy's held
// pieces, or (no dp strategy) the gradients whole.
std::vector<GradientPiece> heldGradientsOf(Strategy* dataParallel, nn::Module& modules);

// Collective over `world`: the squared norm of the `counted` parameters'
// gradients, each element once: every rank's pieces where the dp strategy
// shards them, only the first replica's where each replica holds them all.
double countedNormSquared(comm::Communicator& world, Strategy* dataParallel, nn::Module& modules,
                          const std::set<std::string>& counted, bool firstReplica);

// Before the reporter's gather of the optimizer state: a dp strategy that
// shards it (ZeRO) assembles it into `optimizer` on the first replica.
// Collective over the replicas.
void assembleReplicaState(Strategy* dataParallel, nn::Module& modules, optim::Optimizer& optimizer,
                          bool firstReplica);

}  // namespace dtrain::parallel
