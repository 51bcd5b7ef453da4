// --strategy hogwild as the run configuration sees it: no options of its own,
// the options of other groups it refuses, its check and factory (built into the
// api layer; registered by one line in api/StrategyList.inc).
#include "api/RankRunner.h"
#include "api/StrategyRegistry.h"
#include "core/Error.h"
#include "parallel/hogwild/Hogwild.h"

namespace dtrain::api {

StrategyEntry hogwildStrategy() {
  StrategyEntry e;
  e.name = "hogwild";
  e.summary = "hogwild (threads updating one parameter set without locks)";
  e.groups = trainerGroups({});
  e.ignores = noMesh("hogwild", {{"memory.zero", kZeroNotHere},
                                 {"memory.offload", kOffloadNotHere},
                                 {"checkpoint.every", kNoPeriodicCheckpoints},
                                 {"training.accumulate", "applies to --strategy allreduce"},
                                 {"optimizer.scale_lr", "does not apply to --strategy hogwild (each "
                                  "worker's update is its own step of --batch-size samples)"}});
  e.make = [](const runtime::TrainConfig&, comm::Communicator& comm, const SharedRun& shared) {
    DTRAIN_CHECK(shared.hogwild, "--strategy hogwild: no shared parameter set");
    return std::make_unique<parallel::Hogwild>(comm, shared.hogwild);
  };
  e.validate = [](const RunConfig& rc) {
    DTRAIN_CHECK_USAGE(rc.train.backend == "local", "--strategy hogwild shares one parameter set "
                       "between threads of one process: use --backend local");
  };
  e.sharesParameters = true;
  e.sumsEveryStep = false;  // each worker logs its own loss and stops on its own
  return e;
}

}  // namespace dtrain::api
