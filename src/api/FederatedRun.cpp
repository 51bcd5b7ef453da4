#include "api/FederatedRun.h"

#include "api/ResultLine.h"

#include <memory>

#include "api/MpiRun.h"
#include "core/Error.h"
#include "federated/FederatedRunner.h"

namespace dtrain::api {

namespace {
// `mpirun -np N dtrain train --strategy fedavg --backend mpi`: rank 0 serves,
// ranks 1..N-1 host the clients (FederatedRunner::setCommunicator).
nlohmann::json runFederatedMpi(const RunConfig& rc) {
  return runMpiProcess([&rc](comm::Communicator& comm) {
    federated::FederatedRunner runner(rc.train, rc.federated);
    runner.setCommunicator(&comm);
    nlohmann::json out = runner.run();
    if (comm.rank() != 0) return nlohmann::json();  // the server (rank 0) reports
    addRunFields(out, rc, rc.train.workers, "mpi");
    out["client_hosts"] = comm.size() - 1;
    return out;
  }, commLimits(rc.train.callTimeoutS, rc.train.commTimeoutS));
}
}  // namespace

nlohmann::json runFederated(const RunConfig& rc, runtime::TaskData data) {
  if (rc.train.backend == "mpi") return runFederatedMpi(rc);
  federated::FederatedRunner runner(rc.train, rc.federated, std::move(data));
  nlohmann::json out = runner.run();
  addRunFields(out, rc, rc.train.workers, "simulated");
  return out;
}

}  // namespace dtrain::api
