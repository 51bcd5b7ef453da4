#include "parallel/ps/ServerBench.h"

#include <cmath>
#include <mutex>

#include "comm/local/Local.h"
#include "core/Error.h"
#include "core/Timer.h"
#include "nn/ModelRegistry.h"
#include "optim/Factory.h"
#include "parallel/ps/Server.h"
#include "parallel/ps/Worker.h"

namespace dtrain::parallel::ps {

nlohmann::json runServerBench(const ServerBenchConfig& c) {
  DTRAIN_CHECK_USAGE(c.servers >= 1, "--servers must be >= 1 (got ", c.servers, ")");
  DTRAIN_CHECK_USAGE(c.workers >= 1, "--workers must be >= 1 (got ", c.workers, ")");
  DTRAIN_CHECK_USAGE(std::isfinite(c.seconds) && c.seconds > 0,
                     "--seconds must be positive (got ", c.seconds, ")");
  PsOptions o;
  o.servers = c.servers;
  o.workers = c.workers;
  o.consistency = Consistency::Async;
  o.optimizerOptions.lr = 1e-3;
  o.optimizerOptions.momentum = 0.9;
  nlohmann::json out;
  std::mutex mu;
  int64_t parameters = 0;
  comm::local::runLocal(c.servers + c.workers, [&](comm::Communicator& comm) {
    auto model = nn::buildModel(c.model, {}, 0);
    if (comm.rank() < c.servers) {
      ParameterServer server(comm, *model, o);
      server.run();
      return;
    }
    auto opt = optim::makeOptimizer("sgd", model->namedParameters(), o.optimizerOptions);
    PsWorker worker(comm, o);
    worker.setup(*model, *opt);
    for (auto& p : model->parameters()) p.setGradBuffer(Tensor::full(p.data().shape(), 1e-6f));
    Timer clock;
    for (int64_t step = 0; clock.seconds() < c.seconds; ++step) {
      worker.beginStep(step);
      worker.finishGradients();
      worker.applyUpdate(*opt);
    }
    worker.finish(*model, *opt);
    if (worker.rank() != 0) return;
    const auto& stats = worker.serverStats();
    std::vector<int64_t> perServer;
    int64_t bytes = 0;
    double seconds = 0;
    for (const auto& s : stats) {
      perServer.push_back(s.updates);
      bytes += s.bytesIn + s.bytesOut;
      seconds = std::max(seconds, s.seconds);
    }
    std::lock_guard<std::mutex> lock(mu);
    parameters = model->parameterCount();
    out = {{"servers", c.servers},
           {"workers", c.workers},
           {"model", c.model},
           {"parameters", parameters},
           {"pushes", stats[0].pushes},
           {"seconds", seconds},
           // Every push updates every shard once: server 0's count is the group's.
           {"updates_per_s", stats[0].updates / std::max(1e-9, seconds)},
           {"bytes_per_s", static_cast<double>(bytes) / std::max(1e-9, seconds)},
           {"updates_per_server", perServer}};
  });
  return out;
}

}  // namespace dtrain::parallel::ps
