#include "federated/FederatedOptions.h"

#include <cmath>

#include "core/Error.h"
#include "federated/Aggregators.h"
#include "federated/Attacks.h"

namespace dtrain::federated {

int FederatedOptions::secaggThresholdFor(int selected) const {
  const int t = secaggThreshold > 0 ? secaggThreshold : (2 * selected + 2) / 3;
  return std::clamp(t, 1, std::max(1, selected));
}

int FederatedOptions::clientsPerRound() const {
  return std::max(1, static_cast<int>(std::lround(clientFraction * clients)));
}

void FederatedOptions::validate() const {
  auto finite = [](double v) { return std::isfinite(v); };
  DTRAIN_CHECK_USAGE(clients >= 1 && clients <= 1000000, "--clients must be in [1, 1000000] (got ",
                     clients, ")");
  DTRAIN_CHECK_USAGE(partition == "iid" || partition == "shards" || partition == "dirichlet",
                     "unknown --partition '", partition, "' (known: iid, shards, dirichlet)");
  DTRAIN_CHECK_USAGE(shardsPerClient >= 1, "--shards-per-client must be >= 1 (got ",
                     shardsPerClient, ")");
  DTRAIN_CHECK_USAGE(finite(dirichletAlpha) && dirichletAlpha > 0,
                     "--dirichlet-alpha must be > 0 (got ", dirichletAlpha, ")");
  DTRAIN_CHECK_USAGE(finite(quantitySkew) && quantitySkew >= 0,
                     "--quantity-skew must be >= 0 (got ", quantitySkew, ")");
  DTRAIN_CHECK_USAGE(quantitySkew == 0 || partition == "iid",
                     "--quantity-skew applies to --partition iid (got --partition ", partition, ")");
  DTRAIN_CHECK_USAGE(rounds >= 1, "--rounds must be >= 1 (got ", rounds, ")");
  DTRAIN_CHECK_USAGE(finite(clientFraction) && clientFraction > 0 && clientFraction <= 1,
                     "--client-fraction must be in (0, 1] (got ", clientFraction, ")");
  DTRAIN_CHECK_USAGE(localEpochs >= 1, "--local-epochs must be >= 1 (got ", localEpochs, ")");
  DTRAIN_CHECK_USAGE(localBatch >= 0, "--local-batch must be >= 0 (0: the whole local set; got ",
                     localBatch, ")");
  DTRAIN_CHECK_USAGE(serverOptimizer == "avg" || serverOptimizer == "momentum" ||
                         serverOptimizer == "adam",
                     "unknown --server-optimizer '", serverOptimizer,
                     "' (known: avg, momentum, adam)");
  DTRAIN_CHECK_USAGE(!serverLr || (finite(*serverLr) && *serverLr > 0),
                     "--server-lr must be > 0 (got ", serverLr.value_or(0), ")");
  DTRAIN_CHECK_USAGE(finite(serverMomentum) && serverMomentum >= 0 && serverMomentum < 1,
                     "--server-momentum must be in [0, 1) (got ", serverMomentum, ")");
  DTRAIN_CHECK_USAGE(finite(proxMu) && proxMu >= 0, "--prox-mu must be >= 0 (got ", proxMu, ")");
  DTRAIN_CHECK_USAGE(finite(clientDropout) && clientDropout >= 0 && clientDropout < 1,
                     "--client-dropout must be in [0, 1) (got ", clientDropout, ")");
  DTRAIN_CHECK_USAGE(finite(targetAccuracy) && targetAccuracy >= 0 && targetAccuracy <= 1,
                     "--target-accuracy must be in [0, 1] (got ", targetAccuracy, ")");
  DTRAIN_CHECK_USAGE(finite(dpClip) && dpClip >= 0, "--dp-clip must be >= 0 (got ", dpClip, ")");
  DTRAIN_CHECK_USAGE(finite(dpNoise) && dpNoise >= 0, "--dp-noise must be >= 0 (got ", dpNoise,
                     ")");
  DTRAIN_CHECK_USAGE(finite(dpDelta) && dpDelta > 0 && dpDelta < 1,
                     "--dp-delta must be in (0, 1) (got ", dpDelta, ")");
  DTRAIN_CHECK_USAGE(dpNoise == 0 || dp(), "--dp-noise needs --dp-clip S (the sensitivity)");
  DTRAIN_CHECK_USAGE(!dp() || aggregator == "mean",
                     "--dp-clip: DP-FedAvg adds noise to the sum of the clipped updates, which "
                     "--aggregator ", aggregator, " does not compute; use --aggregator mean");
  federated::aggregator(aggregator);  // throws on an unknown name
  DTRAIN_CHECK_USAGE(finite(trimFraction) && trimFraction >= 0 && trimFraction < 0.5,
                     "--trim-fraction must be in [0, 0.5) (got ", trimFraction, ")");
  DTRAIN_CHECK_USAGE(byzantine >= 0, "--byzantine must be >= 0 (got ", byzantine, ")");
  const size_t need = minimumUpdates(aggregator, {trimFraction, byzantine});
  DTRAIN_CHECK_USAGE(dp() || static_cast<size_t>(clientsPerRound()) >= need, "--aggregator ",
                     aggregator, " with --byzantine ", byzantine, " needs at least ", need,
                     " clients per round (2f + 3); this run samples ", clientsPerRound());
  federated::attack(attack);  // throws on an unknown name
  DTRAIN_CHECK_USAGE(finite(attackers) && attackers >= 0 && attackers < 1,
                     "--attackers must be a fraction of the clients in [0, 1) (got ", attackers,
                     ")");
  DTRAIN_CHECK_USAGE(attackers == 0 || attack != "none", "--attackers needs --attack NAME");
  DTRAIN_CHECK_USAGE(finite(attackScale), "--attack-scale must be finite (got ", attackScale, ")");
  DTRAIN_CHECK_USAGE(finite(roundDeadlineS) && roundDeadlineS >= 0,
                     "--round-deadline-s must be >= 0 (got ", roundDeadlineS, ")");
  DTRAIN_CHECK_USAGE(deadlineClock == "simulated" || deadlineClock == "wall",
                     "--deadline-clock must be simulated or wall (got ", deadlineClock, ")");
  DTRAIN_CHECK_USAGE(deadlineClock == "simulated" || slowClients == 0,
                     "--slow-clients applies to --deadline-clock simulated (on the wall clock, "
                     "slow hosts are really slow: see scripts/netsim.sh --host-rate)");
  DTRAIN_CHECK_USAGE(finite(clientSpeed) && clientSpeed > 0,
                     "--client-speed must be > 0 samples/s (got ", clientSpeed, ")");
  DTRAIN_CHECK_USAGE(finite(slowClients) && slowClients >= 0 && slowClients <= 1,
                     "--slow-clients must be a fraction in [0, 1] (got ", slowClients, ")");
  DTRAIN_CHECK_USAGE(finite(slowFactor) && slowFactor >= 1, "--slow-factor must be >= 1 (got ",
                     slowFactor, ")");
  // Secure aggregation hides the individual updates that robust rules inspect.
  DTRAIN_CHECK_USAGE(!secureAggregation || aggregator == "mean",
                     "--secure-aggregation gives the server only the sum of the updates; --aggregator ",
                     aggregator, " needs each update (use --aggregator mean)");
  DTRAIN_CHECK_USAGE(!secureAggregation || !dp(),
                     "--secure-aggregation with --dp-clip is not built yet (the clients would "
                     "clip, the server add the noise to the unmasked sum)");
  DTRAIN_CHECK_USAGE(secaggThreshold >= 0, "--secagg-threshold must be >= 0 (got ", secaggThreshold, ")");
  DTRAIN_CHECK_USAGE(secaggThreshold <= clientsPerRound(), "--secagg-threshold ", secaggThreshold,
                     " exceeds the ", clientsPerRound(), " clients per round");
  DTRAIN_CHECK_USAGE(secaggThreshold == 0 || secureAggregation,
                     "--secagg-threshold needs --secure-aggregation");
}

}  // namespace dtrain::federated
