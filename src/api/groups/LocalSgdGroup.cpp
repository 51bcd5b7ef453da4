// [localsgd]: local SGD / post-local SGD / DiLoCo (parallel/localsgd/).
#include "api/Schema.h"

namespace dtrain::api {

using runtime::TrainConfig;

void addLocalSgdOptions(Schema& s) {
  s.addGroup("localsgd", "Local SGD and DiLoCo (--strategy local-sgd)");
  s.add("localsgd", "sync_every", "--sync-every",
        "Inner optimizer steps of every worker on its own batches between parameter averages (H)")
      .train(&TrainConfig::syncEvery).range(1);
  s.add("localsgd", "start_step", "--local-sgd-start-step",
        "Synchronous allreduce steps before local SGD starts (post-local SGD)")
      .train(&TrainConfig::localSgdStartStep).range(0);
  s.add("localsgd", "outer_optimizer", "--outer-optimizer",
        "Step on the workers' averaged parameter delta: sgd (lr 1, no momentum: plain averaging) "
        "or nesterov (DiLoCo: --outer-lr 0.7 --outer-momentum 0.9)")
      .train(&TrainConfig::outerOptimizer).oneOf({"sgd", "nesterov"}).result("outer_optimizer");
  s.add("localsgd", "outer_lr", "--outer-lr", "Outer learning rate")
      .train(&TrainConfig::outerLr).above(0).result("outer_lr");
  s.add("localsgd", "outer_momentum", "--outer-momentum", "Outer momentum, in [0, 1)")
      .train(&TrainConfig::outerMomentum).range(0, 0.9999).result("outer_momentum");
}

}  // namespace dtrain::api
