// [sandblaster]: DistBelief's batch L-BFGS over workers (parallel/sandblaster/).
#include "api/Schema.h"

namespace dtrain::api {

using runtime::TrainConfig;

void addSandblasterOptions(Schema& s) {
  s.addGroup("sandblaster", "Sandblaster L-BFGS (--strategy sandblaster --optimizer lbfgs)");
  s.add("sandblaster", "servers", "--sandblaster-servers",
        "Parameter-server shards holding the parameters and the L-BFGS history, which run its "
        "vector operations so the coordinator moves only scalars (0: the coordinator holds them)")
      .train(&TrainConfig::sandblasterServers).range(0, 4096).result("sandblaster_servers");
  s.add("sandblaster", "work_units", "--work-units",
        "Units each batch gradient is cut into, handed to workers as they become free "
        "(0: 4 per worker)")
      .train(&TrainConfig::workUnits).range(0).result("work_units");
  s.add("sandblaster", "backup_tasks", "--backup-tasks",
        "Give the last pending units to a second, free worker; the first answer wins")
      .train(&TrainConfig::backupTasks).negated("--no-backup-tasks");
  s.add("sandblaster", "data", "--sandblaster-data",
        "Who reads a work unit's samples: workers (each from its own copy of the data, told the "
        "step and the unit's range, as DistBelief's workers read their shards) or coordinator "
        "(it sends them with the unit)")
      .train(&TrainConfig::sandblasterData).oneOf({"workers", "coordinator"}).result("sandblaster_data");
}

}  // namespace dtrain::api
