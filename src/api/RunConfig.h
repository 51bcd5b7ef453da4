#pragma once
// Everything one training run is configured by: the trainer's options and, for
// --strategy fedavg, federated learning's. The schema (api/Schema.h) is the one
// description of its fields that flags, config files and the result line share.
#include "federated/FederatedOptions.h"
#include "runtime/TrainConfig.h"

namespace dtrain::api {

struct RunConfig {
  runtime::TrainConfig train;
  federated::FederatedOptions federated;
};

}  // namespace dtrain::api
