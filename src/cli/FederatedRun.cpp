#include "cli/FederatedRun.h"

#include "cli/ResultLine.h"

#include <iostream>
#include <memory>

#include "comm/Registry.h"
#include "core/Error.h"
#include "federated/FederatedRunner.h"

namespace dtrain::cli {

namespace {
// `mpirun -np N dtrain train --strategy fedavg --backend mpi`: rank 0 serves,
// ranks 1..N-1 host the clients (FederatedRunner::setCommunicator).
void runFederatedMpi(const api::RunConfig& rc) {
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
      std::cout << out.dump() << std::endl;
    }
    comm.reset();
    comm::shutdown(0);
  } catch (const std::exception& e) {
    const bool usage = dynamic_cast<const UsageError*>(&e) != nullptr;
    comm.reset();
    comm::shutdown(usage ? 2 : 1, std::string("dtrain: error: ") + e.what());
    throw;
  }
}
}  // namespace

void runFederated(const api::RunConfig& rc) {
  if (rc.train.backend == "mpi") return runFederatedMpi(rc);
  federated::FederatedRunner runner(rc.train, rc.federated);
  nlohmann::json out = runner.run();
  addRunFields(out, rc, rc.train.workers, "simulated");
  std::cout << out.dump() << std::endl;
}

}  // namespace dtrain::cli
