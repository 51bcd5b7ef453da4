#include "cli/BenchCommand.h"

#include <iostream>
#include <memory>
#include <string>

#include "comm/AllreduceBench.h"
#include "comm/BackendRegistry.h"
#include "core/Error.h"
#include "nn/ModelRegistry.h"
#include "parallel/ps/ServerBench.h"

namespace dtrain::cli {

void addBenchCommand(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Measure parts of dtrain against their peers");
  bench->require_subcommand(1);
  CLI::App* ar = bench->add_subcommand(
      "allreduce",
      "Allreduce time, algbw = bytes/time and busbw = algbw*2(n-1)/n per size (nccl-tests "
      "convention); every result is checked. With --backend mpi run it under mpirun.");
  struct Flags {
    comm::AllreduceBenchConfig cfg;
    std::string algo = "auto";
    bool noChecks = false;
  };
  auto f = std::make_shared<Flags>();
  ar->add_option("--backend", f->cfg.backend, "local (threads) | mpi (under mpirun)")
      ->capture_default_str();
  ar->add_option("--workers", f->cfg.workers,
                 "ranks: local threads; mpi: must equal mpirun -np (default: whatever "
                 "mpirun started)")
      ->capture_default_str();
  ar->add_option("--algo", f->algo,
                 "ring | rhd | tree | hier | shm | native | auto, or a comma-separated list")
      ->capture_default_str();
  ar->add_option("--min-bytes", f->cfg.minBytes, "smallest message in bytes")->capture_default_str();
  ar->add_option("--max-bytes", f->cfg.maxBytes, "largest message in bytes")->capture_default_str();
  ar->add_option("--step-factor", f->cfg.stepFactor, "size multiplier between rows")
      ->capture_default_str();
  ar->add_option("--idle-ms", f->cfg.idleMs,
                 "time each call after this many ms with the links idle (training's calls come after "
                 "compute: an emulated link's token bucket refills); 0: calls back to back")
      ->capture_default_str();
  ar->add_option("--busy-ms", f->cfg.busyMs,
                 "time each call after this many ms of compute (CPU time: the same work however many "
                 "processes share the core), as a tensor-parallel sum comes after a layer")
      ->capture_default_str();
  ar->add_option("--iters", f->cfg.iters, "allreduces per timed run (0 = by size, 5..200)")
      ->capture_default_str();
  ar->add_option("--runs", f->cfg.runs, "timed runs per size; the median is reported")
      ->capture_default_str();
  ar->add_flag("--json", f->cfg.json, "print one JSON object instead of the table");
  ar->add_flag("--no-call-checks", f->noChecks,
               "mpi: skip the cross-rank comparison of call descriptors");
  ar->callback([f, ar] {
    // Under mpirun the world size is mpirun's (as for train): the local default
    // of 2 workers would contradict any other -np.
    if (f->cfg.backend == "mpi" && ar->count("--workers") == 0) f->cfg.workers = 0;
    f->cfg.algos = comm::parseAlgorithms(f->algo);
    f->cfg.callChecks = !f->noChecks;
    if (f->cfg.backend != "mpi") {
      comm::runAllreduceBench(f->cfg, std::cout);
      return;
    }
    // Under mpirun, a failing rank prints its error (with its rank) and aborts
    // the job, so that the other ranks do not sit in a collective until their
    // timeouts; on success MPI is finalized here.
    try {
      comm::runAllreduceBench(f->cfg, std::cout);
    } catch (const UsageError& e) {
      comm::shutdown(2, e.what());
      throw;
    } catch (const std::exception& e) {
      comm::shutdown(1, e.what());
      throw;
    }
    comm::shutdown(0);
  });

  CLI::App* ps = bench->add_subcommand(
      "ps",
      "Parameter-server throughput: updates/s that S servers absorb from W workers pushing "
      "whole-model gradients and fetching parameters back (async, no model compute; local "
      "backend). Prints one JSON line.");
  auto pf = std::make_shared<parallel::ps::ServerBenchConfig>();
  ps->add_option("--servers", pf->servers, "server ranks (threads)")->capture_default_str();
  ps->add_option("--workers", pf->workers, "worker ranks (threads)")->capture_default_str();
  ps->add_option("--model", pf->model, "model whose parameters are served")
      ->check(CLI::IsMember(nn::registeredModelNames()))->capture_default_str();
  ps->add_option("--seconds", pf->seconds, "how long the workers push")->capture_default_str();
  ps->callback([pf] { std::cout << parallel::ps::runServerBench(*pf).dump() << std::endl; });
}

}  // namespace dtrain::cli
