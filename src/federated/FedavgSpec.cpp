// --strategy fedavg as the run configuration sees it: its option group
// [federated] (clients, rounds, server optimizer, privacy, robustness and secure
// aggregation: federated/FederatedOptions.h) and the trainer's options it does
// not read (built into the api layer; registered by one line in api/StrategyList.inc).
#include "api/Schema.h"
#include "api/StrategyRegistry.h"
#include "federated/Aggregators.h"
#include "federated/Attacks.h"

namespace dtrain::api {

using federated::FederatedOptions;

namespace {

void addFederatedOptions(Schema& s) {
  s.addGroup("federated", "Federated learning (--strategy fedavg)");
  auto add = [&s](const char* key, const char* flag, std::string help) -> Option& {
    return s.add("federated", key, flag, std::move(help));
  };
  add("clients", "--clients", "Clients K (partitions of the training set)")
      .fed(&FederatedOptions::clients).range(1);
  add("partition", "--partition",
      "iid, shards (sorted by label, 2 shards per client: the paper's non-IID) or dirichlet "
      "(label skew, --dirichlet-alpha)")
      .fed(&FederatedOptions::partition).oneOf({"iid", "shards", "dirichlet"});
  add("shards_per_client", "--shards-per-client", "shards: shards per client")
      .fed(&FederatedOptions::shardsPerClient).range(1);
  add("dirichlet_alpha", "--dirichlet-alpha", "dirichlet: concentration (small: few classes per client)")
      .fed(&FederatedOptions::dirichletAlpha).above(0);
  add("quantity_skew", "--quantity-skew", "iid: log-normal sigma of the client sizes (0: equal sizes)")
      .fed(&FederatedOptions::quantitySkew).range(0);
  add("rounds", "--rounds", "Communication rounds R").fed(&FederatedOptions::rounds).range(1);
  add("client_fraction", "--client-fraction", "C, clients per round m = max(C K, 1)")
      .fed(&FederatedOptions::clientFraction).above(0, 1);
  add("local_epochs", "--local-epochs", "Local epochs E per round")
      .fed(&FederatedOptions::localEpochs).range(1);
  add("local_batch", "--local-batch", "Local batch B (0: the whole local set; FedSGD is E=1 B=0)")
      .fed(&FederatedOptions::localBatch).range(0);
  add("server_optimizer", "--server-optimizer", "avg (FedAvg), momentum (FedAvgM) or adam (FedAdam)")
      .fed(&FederatedOptions::serverOptimizer).oneOf({"avg", "momentum", "adam"});
  add("server_lr", "--server-lr", "Server learning rate (default 1; adam 0.01)")
      .fed(&FederatedOptions::serverLr).above(0);
  add("server_momentum", "--server-momentum", "momentum: server beta")
      .fed(&FederatedOptions::serverMomentum).range(0);
  add("prox_mu", "--prox-mu", "FedProx proximal weight mu (0: off)")
      .fed(&FederatedOptions::proxMu).range(0);
  add("client_dropout", "--client-dropout", "Probability that a selected client does not report")
      .fed(&FederatedOptions::clientDropout).range(0, 1);
  add("target_accuracy", "--target-accuracy",
      "Stop at the first round whose test accuracy reaches it (0: never)")
      .fed(&FederatedOptions::targetAccuracy).range(0, 1);
  add("dp_clip", "--dp-clip", "DP-FedAvg: clip each client's update to this L2 norm (0: no DP)")
      .fed(&FederatedOptions::dpClip).range(0);
  add("dp_noise", "--dp-noise", "DP: noise multiplier z (Gaussian noise of std z * clip on the sum)")
      .fed(&FederatedOptions::dpNoise).range(0);
  add("dp_delta", "--dp-delta", "DP: delta of the reported epsilon")
      .fed(&FederatedOptions::dpDelta).above(0, 1);
  add("aggregator", "--aggregator", federated::describeAggregators())
      .fed(&FederatedOptions::aggregator);
  add("trim_fraction", "--trim-fraction", "trimmed-mean: fraction cut at each end per coordinate")
      .fed(&FederatedOptions::trimFraction).range(0, 0.5);
  add("byzantine", "--byzantine", "krum, multi-krum: Byzantine updates f")
      .fed(&FederatedOptions::byzantine).range(0);
  add("attack", "--attack", "Simulated attack, " + federated::describeAttacks())
      .fed(&FederatedOptions::attack);
  add("attackers", "--attackers", "Fraction of malicious clients")
      .fed(&FederatedOptions::attackers).range(0, 1);
  add("attack_scale", "--attack-scale", "Factor of sign-flip and scale, std of gaussian")
      .fed(&FederatedOptions::attackScale);
  add("round_deadline_s", "--round-deadline-s",
      "Leave out updates arriving after S seconds (0: no deadline), on the --deadline-clock")
      .fed(&FederatedOptions::roundDeadlineS).range(0);
  add("deadline_clock", "--deadline-clock",
      "simulated (clients train at --client-speed) or wall (--backend mpi: the server waits "
      "--round-deadline-s seconds of real time; the hosts' real speed and links decide who is "
      "late)")
      .fed(&FederatedOptions::deadlineClock).oneOf({"simulated", "wall"});
  add("client_speed", "--client-speed", "deadline: samples per second of a client's local training (simulated)")
      .fed(&FederatedOptions::clientSpeed).above(0);
  add("slow_clients", "--slow-clients", "deadline: fraction of slow clients")
      .fed(&FederatedOptions::slowClients).range(0, 1);
  add("slow_factor", "--slow-factor", "deadline: how many times slower they train")
      .fed(&FederatedOptions::slowFactor).range(1);
  add("secure_aggregation", "--secure-aggregation",
      "Bonawitz et al.'s secure aggregation (pairwise X25519 masks, Shamir shares for "
      "dropouts): the server learns only the sum")
      .fed(&FederatedOptions::secureAggregation);
  add("secagg_threshold", "--secagg-threshold",
      "secure aggregation: Shamir threshold t (0: ceil(2m/3) of the m selected)")
      .fed(&FederatedOptions::secaggThreshold).range(0);
}

}  // namespace

// Federated learning runs its own rounds (federated/FederatedRunner.h, started
// by api/FederatedRun.h, not by a rank's trainer): the step loop's options mean
// nothing there; say which options do.
StrategyEntry fedavgStrategy() {
  StrategyEntry e;
  e.name = "fedavg";
  e.summary = "fedavg (federated learning)";
  e.groups = {"model", "data", "training", "optimizer", "federated", "checkpoint", "eval", "logging", "parallel"};
  e.ignores = {
      {"training.batch_size", "does not apply to --strategy fedavg (use --local-batch)"},
      {"training.epochs", "does not apply to --strategy fedavg (use --local-epochs and --rounds)"},
      {"training.max_steps", "does not apply to --strategy fedavg (use --rounds)"},
      {"training.accumulate", "does not apply to --strategy fedavg (use --local-batch)"},
      {"data.augment", "does not apply to --strategy fedavg (clients read their own batches)"},
      {"optimizer.schedule", "does not apply to --strategy fedavg (clients train at a constant --lr)"},
      {"optimizer.warmup_steps", "does not apply to --strategy fedavg (clients train at a constant --lr)"},
      {"optimizer.scale_lr", "does not apply to --strategy fedavg (the server's step is --server-lr)"},
      {"checkpoint.every", "does not apply to --strategy fedavg (--save writes the global model at the end)"},
      {"checkpoint.dir", "does not apply to --strategy fedavg (--save writes the global model at the end)"},
      {"checkpoint.resume", "does not apply to --strategy fedavg (--load starts from a global model)"},
      {"eval.deferred", "does not apply to --strategy fedavg (it evaluates between rounds)"},
      {"eval.val_fraction", "does not apply to --strategy fedavg (its clients hold the data)"},
      {"parallel.pipeline_stages", "does not apply to --strategy fedavg"},
      {"parallel.tensor_parallel", "does not apply to --strategy fedavg"}};
  e.worldSize = nullptr;  // no communicator: its clients are threads of the runner
  e.validate = [](const RunConfig& rc) { rc.federated.validate(); };
  e.sumsEveryStep = false;
  e.addOptions = addFederatedOptions;
  return e;
}

}  // namespace dtrain::api
