#pragma once
// What `dtrain train --strategy fedavg` is configured by besides the TrainConfig
// (model, dataset, client optimizer and --lr, --seed, --threads, --metrics ...).
// The flags are registered in cli/FederatedFlags.cpp.
#include <cstdint>
#include <optional>
#include <string>

namespace dtrain::federated {

struct FederatedOptions {
  int clients = 100;                 // K
  std::string partition = "iid";     // iid, shards, dirichlet
  int shardsPerClient = 2;           // shards: the paper's 2
  double dirichletAlpha = 0.5;       // dirichlet: label skew
  double quantitySkew = 0;           // iid: log-normal sigma of the client sizes (0: equal)
  int64_t rounds = 20;               // R
  double clientFraction = 0.1;       // C: m = max(round(C K), 1) clients per round
  int64_t localEpochs = 1;           // E
  int64_t localBatch = 10;           // B; 0: the whole local set (FedSGD with E = 1)
  std::string serverOptimizer = "avg";  // avg, momentum (FedAvgM), adam (FedAdam)
  std::optional<double> serverLr;    // default 1 (avg, momentum), 0.01 (adam)
  double serverMomentum = 0.9;       // momentum: beta of FedAvgM
  double proxMu = 0;                 // FedProx proximal term mu/2 ||w - w_global||^2
  double clientDropout = 0;          // probability that a selected client does not report
  // Round deadline on a simulated clock: a client's local training takes
  // samples x local epochs / clientSpeed seconds (slowFactor times longer for
  // the slowClients fraction, chosen from the seed); updates that would arrive
  // after roundDeadlineS are left out of the round (0: no deadline).
  double roundDeadlineS = 0;
  // "simulated" (the clock above) or "wall": with --backend mpi, the server
  // waits roundDeadlineS seconds of real time for the updates (WallClockRounds.h).
  std::string deadlineClock = "simulated";
  double clientSpeed = 1000;         // samples per second of a normal client
  double slowClients = 0;            // fraction of slow clients
  double slowFactor = 10;            // how many times slower they are
  double targetAccuracy = 0;         // > 0: stop at the first evaluation reaching it

  // DP-FedAvg (McMahan et al. 2018): clip each update to dpClip, add N(0, (z S)^2)
  // to the sum; Poisson client sampling with q = C, as the accountant assumes.
  double dpClip = 0;                 // S; 0: no differential privacy
  double dpNoise = 0;                // z (noise multiplier)
  double dpDelta = 1e-5;

  // Robustness: the aggregation rule and simulated attackers.
  std::string aggregator = "mean";   // mean, median, trimmed-mean, krum, multi-krum
  double trimFraction = 0.1;         // trimmed-mean: fraction cut at each end per coordinate
  int byzantine = 0;                 // krum, multi-krum: assumed Byzantine updates per round f
  std::string attack = "none";       // none, sign-flip, gaussian, label-flip, scale
  double attackers = 0;              // fraction of the clients that are malicious
  double attackScale = 10;           // scale: factor; sign-flip: -factor; gaussian: std

  // Secure aggregation (SecureAggregation.h): the server learns only the sum;
  // threshold t of the m selected clients (0: ceil(2m/3), at least 1).
  bool secureAggregation = false;
  int secaggThreshold = 0;
  int secaggThresholdFor(int selected) const;

  bool dp() const { return dpClip > 0; }
  // Throws UsageError naming the flag on an invalid value.
  void validate() const;
  double effectiveServerLr() const {
    return serverLr.value_or(serverOptimizer == "adam" ? 0.01 : 1.0);
  }
  // Clients per round: m = max(round(C K), 1).
  int clientsPerRound() const;
};

}  // namespace dtrain::federated
