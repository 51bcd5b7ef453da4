#include "api/MpiRun.h"

#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>

#include "comm/BackendRegistry.h"
#include "core/Error.h"
#include "core/StopSignal.h"

namespace dtrain::api {

namespace {
// True when this process was started by mpirun (OpenMPI or another PMI launcher).
bool underMpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
    if (std::getenv(v)) return true;
  return false;
}
}  // namespace

comm::Millis commTimeout(double seconds) {
  return comm::Millis{static_cast<int64_t>(std::llround(seconds * 1000))};
}

CommLimits commLimits(double callTimeoutS, double peerTimeoutS) {
  return {commTimeout(callTimeoutS), commTimeout(peerTimeoutS)};
}

nlohmann::json runMpiProcess(const std::function<nlohmann::json(comm::Communicator&)>& rank,
                             CommLimits limits) {
  DTRAIN_CHECK_USAGE(comm::hasBackend("mpi"),
                     "--backend mpi: this dtrain was built without MPI (install libopenmpi-dev "
                     "and openmpi-bin, then reconfigure with -DDTRAIN_WITH_MPI=ON)");
  // srun without --mpi=pmix starts the tasks, but each would be an MPI world of one.
  DTRAIN_CHECK_USAGE(underMpirun(), std::getenv("SLURM_STEP_ID")
                     ? "--backend mpi under srun needs the ranks joined by PMIx: srun --mpi=pmix dtrain "
                       "train --backend mpi ... (or mpirun inside the allocation)"
                     : "--backend mpi runs one process per rank under mpirun: mpirun -np N dtrain train "
                       "--backend mpi ... (or use --backend local --workers N)");
  std::unique_ptr<comm::Communicator> comm;
  try {
    comm::BackendConfig config;
    config.timeout = limits.call;
    config.peerTimeout = limits.peer;
    comm = comm::makeCommunicator("mpi", config);
    nlohmann::json out = rank(*comm);
    comm.reset();
    comm::shutdown(0);
    return out;
  } catch (const std::exception& e) {
    // With several ranks this aborts the job at once; with one, MPI is
    // finalized and the caller reports the error.
    const bool usage = dynamic_cast<const UsageError*>(&e) != nullptr;
    const bool interrupted = dynamic_cast<const stop::Interrupted*>(&e) != nullptr;
    // Several ranks: abort the job before freeing the communicator, whose shared
    // window is freed collectively and would wait for the peer that failed or hangs.
    if (!comm || comm->size() == 1) comm.reset();
    comm::shutdown(interrupted ? stop::signalExitCode() : usage ? 2 : 1,
                   interrupted ? std::string(e.what()) : std::string("dtrain: error: ") + e.what());
    comm.reset();
    throw;
  }
}

}  // namespace dtrain::api
