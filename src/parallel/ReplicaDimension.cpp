#include "parallel/ReplicaDimension.h"

#include "parallel/RankSums.h"

namespace dtrain::parallel {

std::vector<GradientPiece> heldGradientsOf(Strategy* dataParallel, nn::Module& modules) {
  return dataParallel ? dataParallel->heldGradients(modules) : wholeGradients(modules);
}

double countedNormSquared(comm::Communicator& world, Strategy* dataParallel, nn::Module& modules,
                          const std::set<std::string>& counted, bool firstReplica) {
  double sum = 0;
  if (!dataParallel || dataParallel->shardsGradients() || firstReplica)
    for (const GradientPiece& p : heldGradientsOf(dataParallel, modules))
      if (counted.count(p.name)) sum += sumOfSquares(p.grad);
  return sumOverRanks(world, sum);
}

void assembleReplicaState(Strategy* dataParallel, nn::Module& modules, optim::Optimizer& optimizer,
                          bool firstReplica) {
  if (!dataParallel) return;
  dataParallel->checkpointState();
  if (firstReplica) dataParallel->syncModel(modules, &optimizer);
}

}  // namespace dtrain::parallel
