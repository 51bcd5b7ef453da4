#include "api/FederatedRun.h"

#include "api/ResultLine.h"

#include <memory>

#include "comm/Registry.h"
#include "core/Error.h"
#include "federated/FederatedRunner.h"

namespace dtrain::api {

namespace {
// `mpirun -np N dtrain train --strategy fedavg --backend mpi`: rank 0 serves,
// ranks 1..N-1 host the clients (FederatedRunner::setCommunicator).
nlohmann::json runFederatedMpi(const RunConfig& rc) {
  DTRAIN_CHECK_USAGE(comm::hasBackend("mpi"), "--backend mpi: this dtrain was built without MPI");
  std::unique_ptr<comm::Communicator> comm;
  try {
    comm = comm::makeCommunicator("mpi");
    federated::FederatedRunner runner(rc.train, rc.federated);
    runner.setCommunicator(comm.get());
    nlohmann::json out = runner.run();
    if (comm->rank() == 0) {
      addRunFields(out, rc, rc.train.workers, "mpi");
      out["client_hosts"] = comm->size() - 1;
    } else {
      out = nlohmann::json();  // the server (rank 0) reports
    }
    comm.reset();
    comm::shutdown(0);
    return out;
  } catch (const std::exception& e) {
    const bool usage = dynamic_cast<const UsageError*>(&e) != nullptr;
    comm.reset();
    comm::shutdown(usage ? 2 : 1, std::string("dtrain: error: ") + e.what());
    throw;
  }
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
