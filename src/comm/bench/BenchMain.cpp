// dtrain_comm_bench: the `dtrain bench allreduce` benchmark as a stand-alone
// binary (handy under mpirun). Same flags, same code (comm/AllreduceBench).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "comm/AllreduceBench.h"
#include "comm/BackendRegistry.h"
#include "core/Error.h"

int main(int argc, char** argv) {
  using namespace dtrain;
  CLI::App app{"dtrain_comm_bench: allreduce benchmark", "dtrain_comm_bench"};
  comm::AllreduceBenchConfig cfg;
  std::string algos = "auto";
  bool noChecks = false;
  app.add_option("--backend", cfg.backend, "local | mpi");
  app.add_option("--workers", cfg.workers, "ranks (local threads; mpi: must match -np, 0 = any)");
  app.add_option("--algo", algos, "ring|rhd|tree|hier|shm|native|auto, or a comma-separated list");
  app.add_option("--min-bytes", cfg.minBytes, "smallest message");
  app.add_option("--max-bytes", cfg.maxBytes, "largest message");
  app.add_option("--step-factor", cfg.stepFactor, "size multiplier between rows");
  app.add_option("--iters", cfg.iters, "allreduces per timed run (0 = by size)");
  app.add_option("--runs", cfg.runs, "timed runs per size (median reported)");
  app.add_flag("--json", cfg.json, "one JSON object instead of the table");
  app.add_flag("--no-call-checks", noChecks, "mpi: skip the cross-rank call check");
  int code = 0;
  std::string message;
  try {
    app.parse(argc, argv);
    cfg.algos = comm::parseAlgorithms(algos);
    cfg.callChecks = !noChecks;
    comm::runAllreduceBench(cfg, std::cout);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const UsageError& e) {
    message = e.what();
    code = 2;
  } catch (const std::exception& e) {
    message = e.what();
    code = 1;
  }
  if (code) std::fprintf(stderr, "dtrain_comm_bench: error: %s\n", message.c_str());
  comm::shutdown(code, message);
  return code;
}
