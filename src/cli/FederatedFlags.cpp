#include "cli/FederatedFlags.h"

#include <iostream>
#include <memory>

#include "comm/Registry.h"
#include "core/Error.h"
#include "federated/Aggregators.h"
#include "federated/Attacks.h"
#include "federated/FederatedRunner.h"

namespace dtrain::cli {
namespace {
const char* const kFederatedFlags[] = {
    "--clients",        "--partition",     "--shards-per-client", "--dirichlet-alpha",
    "--quantity-skew",  "--rounds",        "--client-fraction",   "--local-epochs",
    "--local-batch",    "--server-optimizer", "--server-lr",      "--server-momentum",
    "--prox-mu",        "--client-dropout", "--target-accuracy",  "--dp-clip",
    "--dp-noise",       "--dp-delta",      "--aggregator",        "--trim-fraction",
    "--byzantine",      "--attack",        "--attackers",         "--attack-scale",
    "--secure-aggregation", "--secagg-threshold", "--round-deadline-s", "--client-speed",
    "--slow-clients",   "--slow-factor",   "--deadline-clock"};
}  // namespace

std::shared_ptr<federated::FederatedOptions> addFederatedFlags(CLI::App* sub) {
  auto o = std::make_shared<federated::FederatedOptions>();
  sub->add_option("--clients", o->clients, "fedavg: clients K (partitions of the training set)")
      ->capture_default_str();
  sub->add_option("--partition", o->partition,
                  "fedavg: iid, shards (sorted by label, 2 shards per client: the paper's "
                  "non-IID) or dirichlet (label skew, --dirichlet-alpha)")
      ->capture_default_str();
  sub->add_option("--shards-per-client", o->shardsPerClient, "fedavg shards: shards per client")
      ->capture_default_str();
  sub->add_option("--dirichlet-alpha", o->dirichletAlpha,
                  "fedavg dirichlet: concentration (small: few classes per client)")
      ->capture_default_str();
  sub->add_option("--quantity-skew", o->quantitySkew,
                  "fedavg iid: log-normal sigma of the client sizes (0: equal sizes)")
      ->capture_default_str();
  sub->add_option("--rounds", o->rounds, "fedavg: communication rounds R")->capture_default_str();
  sub->add_option("--client-fraction", o->clientFraction,
                  "fedavg: C, clients per round m = max(C K, 1)")
      ->capture_default_str();
  sub->add_option("--local-epochs", o->localEpochs, "fedavg: local epochs E per round")
      ->capture_default_str();
  sub->add_option("--local-batch", o->localBatch,
                  "fedavg: local batch B (0: the whole local set; FedSGD is E=1 B=0)")
      ->capture_default_str();
  sub->add_option("--server-optimizer", o->serverOptimizer,
                  "fedavg: avg (FedAvg), momentum (FedAvgM) or adam (FedAdam)")
      ->capture_default_str();
  sub->add_option_function<double>("--server-lr", [o](double v) { o->serverLr = v; },
                                   "fedavg: server learning rate (default 1; adam 0.01)");
  sub->add_option("--server-momentum", o->serverMomentum, "fedavg momentum: server beta")
      ->capture_default_str();
  sub->add_option("--prox-mu", o->proxMu, "fedavg: FedProx proximal weight mu (0: off)")
      ->capture_default_str();
  sub->add_option("--client-dropout", o->clientDropout,
                  "fedavg: probability that a selected client does not report")
      ->capture_default_str();
  sub->add_option("--target-accuracy", o->targetAccuracy,
                  "fedavg: stop at the first round whose test accuracy reaches it (0: never)")
      ->capture_default_str();
  sub->add_option("--dp-clip", o->dpClip,
                  "fedavg: DP-FedAvg, clip each client's update to this L2 norm (0: no DP)")
      ->capture_default_str();
  sub->add_option("--dp-noise", o->dpNoise,
                  "fedavg DP: noise multiplier z (Gaussian noise of std z * clip on the sum)")
      ->capture_default_str();
  sub->add_option("--dp-delta", o->dpDelta, "fedavg DP: delta of the reported epsilon")
      ->capture_default_str();
  sub->add_option("--aggregator", o->aggregator,
                  "fedavg: " + federated::describeAggregators())
      ->capture_default_str();
  sub->add_option("--trim-fraction", o->trimFraction,
                  "fedavg trimmed-mean: fraction cut at each end per coordinate")
      ->capture_default_str();
  sub->add_option("--byzantine", o->byzantine, "fedavg krum, multi-krum: Byzantine updates f")
      ->capture_default_str();
  sub->add_option("--attack", o->attack, "fedavg: simulated attack, " + federated::describeAttacks())
      ->capture_default_str();
  sub->add_option("--attackers", o->attackers, "fedavg: fraction of malicious clients")
      ->capture_default_str();
  sub->add_option("--attack-scale", o->attackScale,
                  "fedavg: factor of sign-flip and scale, std of gaussian")
      ->capture_default_str();
  sub->add_option("--round-deadline-s", o->roundDeadlineS,
                  "fedavg: leave out updates arriving after S seconds (0: no deadline), on the "
                  "--deadline-clock")
      ->capture_default_str();
  sub->add_option("--deadline-clock", o->deadlineClock,
                  "fedavg: simulated (clients train at --client-speed) or wall (--backend mpi: "
                  "the server waits --round-deadline-s seconds of real time; the hosts' real "
                  "speed and links decide who is late)")
      ->capture_default_str();
  sub->add_option("--client-speed", o->clientSpeed,
                  "fedavg deadline: samples per second of a client's local training (simulated)")
      ->capture_default_str();
  sub->add_option("--slow-clients", o->slowClients, "fedavg deadline: fraction of slow clients")
      ->capture_default_str();
  sub->add_option("--slow-factor", o->slowFactor, "fedavg deadline: how many times slower they train")
      ->capture_default_str();
  sub->add_flag("--secure-aggregation", o->secureAggregation,
                "fedavg: Bonawitz et al.'s secure aggregation (pairwise X25519 masks, Shamir "
                "shares for dropouts): the server learns only the sum");
  sub->add_option("--secagg-threshold", o->secaggThreshold,
                  "fedavg secure aggregation: Shamir threshold t (0: ceil(2m/3) of the m selected)")
      ->capture_default_str();
  return o;
}

namespace {
// `mpirun -np N dtrain train --strategy fedavg --backend mpi`: rank 0 serves,
// ranks 1..N-1 host the clients (FederatedRunner::setCommunicator).
bool runFederatedMpi(const runtime::TrainConfig& c, const federated::FederatedOptions& o) {
  DTRAIN_CHECK_USAGE(comm::hasBackend("mpi"), "--backend mpi: this dtrain was built without MPI");
  std::unique_ptr<comm::Communicator> comm;
  try {
    comm = comm::makeCommunicator("mpi");
    federated::FederatedRunner runner(c, o);
    runner.setCommunicator(comm.get());
    nlohmann::json out = runner.run();
    if (comm->rank() == 0) {
      out["model"] = c.model;
      out["dataset"] = c.dataset;
      out["threads"] = c.threads;
      out["client_hosts"] = comm->size() - 1;
      out["strategy"] = "fedavg";
      out["backend"] = "mpi";
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
  return true;
}
}  // namespace

bool runFederatedIfChosen(const runtime::TrainConfig& c, const federated::FederatedOptions& o,
                          const std::function<bool(const char* flag)>& given) {
  if (c.strategy != "fedavg") {
    for (const char* flag : kFederatedFlags)
      DTRAIN_CHECK_USAGE(!given(flag), flag, " applies to --strategy fedavg");
    return false;
  }
  // The trainer's step-loop flags mean nothing here; say which flags do.
  const std::pair<const char*, const char*> replaced[] = {
      {"--batch-size", "--local-batch"}, {"--epochs", "--local-epochs and --rounds"},
      {"--max-steps", "--rounds"}, {"--accumulate", "--local-batch"}};
  for (const auto& [flag, instead] : replaced)
    DTRAIN_CHECK_USAGE(!given(flag), flag, " does not apply to --strategy fedavg (use ", instead,
                       ")");
  if (c.backend == "mpi") return runFederatedMpi(c, o);
  federated::FederatedRunner runner(c, o);
  nlohmann::json out = runner.run();
  out["model"] = c.model;
  out["dataset"] = c.dataset;
  out["threads"] = c.threads;
  out["workers"] = c.workers;
  out["strategy"] = "fedavg";
  out["backend"] = "simulated";
  std::cout << out.dump() << std::endl;
  return true;
}

}  // namespace dtrain::cli
