#pragma once
// Runs a parameter-server job in-process (local backend: servers and workers
// as threads) through the same classes the CLI uses, keeping what the tests
// inspect: worker 0's final parameters and optimizer state, every server's
// statistics and every worker's figures.
#include <memory>
#include <mutex>

#include "core/ThreadPool.h"
#include "nn/Models.h"
#include "tensor/cpu/Blas.h"
#include "parallel/ParallelTestUtil.h"
#include "parallel/ps/Server.h"
#include "parallel/ps/Worker.h"

namespace dtrain::test {

struct PsRun {
  Params params;  // worker 0's, after the run (the servers' final state)
  Params optimizerState;
  runtime::TrainResult result;
  std::vector<parallel::ps::ServerStats> servers;
  std::vector<std::map<std::string, double>> workers;  // PsWorker::stats()
};

// The CLI's options for config c with `servers` servers and `consistency`
// (the tests then adjust fields the config has no flag value for).
inline parallel::ps::PsOptions psOptions(const runtime::TrainConfig& c, int servers,
                                         parallel::ps::Consistency consistency) {
  runtime::TrainConfig d = c;
  d.servers = servers;
  parallel::ps::PsOptions o = runtime::psOptions(d, servers);  // a worker's rank
  o.consistency = consistency;
  return o;
}

inline Params stateSnapshot(optim::Optimizer& opt) {
  Params p;
  for (auto& [name, t] : opt.namedState())
    if (t->dtype() == DType::F32) p[name] = t->contiguous().toVector();
  return p;
}

// `perRank` adjusts the options of one rank (fault injection); may be null.
inline PsRun runPs(const runtime::TrainConfig& c, const parallel::ps::PsOptions& o,
                   const std::function<void(int, parallel::ps::PsOptions&)>& perRank = nullptr) {
  // As the CLI's local launcher: one kernel thread per rank (the ranks are
  // the parallelism; OpenBLAS's default of every core per call oversubscribes).
  setNumThreads(1);
  kernels::setBlasThreads(1);
  auto train = runtime::loadDataset(c, true);
  auto test = runtime::loadDataset(c, false);
  PsRun out;
  out.servers.resize(o.servers);
  out.workers.resize(o.workers);
  comm::local::runLocal(o.servers + o.workers, [&](comm::Communicator& comm) {
    parallel::ps::PsOptions mine = o;
    if (perRank) perRank(comm.rank(), mine);
    if (comm.rank() < o.servers) {
      auto model = nn::makeModel(c.model, c.seed);
      parallel::ps::ParameterServer server(comm, *model, mine);
      out.servers[comm.rank()] = server.run();
      return;
    }
    auto strategy = std::make_unique<parallel::ps::PsWorker>(comm, mine);
    auto* worker = strategy.get();
    const int w = worker->rank();
    runtime::Trainer t(c, std::move(strategy));
    t.setData(train, test);
    runtime::TrainResult r = t.run();
    out.workers[w] = worker->stats();
    if (w == 0) {
      worker->syncModel(t.model(), &t.optimizer());
      out.params = snapshot(t.model());
      out.optimizerState = stateSnapshot(t.optimizer());
      out.result = r;
    }
  });
  return out;
}

}  // namespace dtrain::test
