#pragma once
// Measured compute of one of dtrain's models at one micro-batch size: forward,
// backward and optimizer-update times, whole and per layer of its layer
// sequence (nn/LayerSequence.h: the unit a pipeline cuts into stages), with
// each layer's parameters and the activation bytes its forward keeps for
// backward. Times are medians over timed steps after warm-up ones.
#include <cstdint>
#include <string>
#include <vector>

namespace dtrain::calibrate {

struct LayerTimes {
  std::string name;
  int64_t params = 0;           // a module shared by layers (gpt's tied wte) counts in the first
  double forwardS = 0;
  double backwardS = 0;
  int64_t activationBytes = 0;  // allocated by the forward and held until backward
};

struct ModelTimes {
  std::string optimizer;        // what `dtrain train` uses for this model by default
  int64_t params = 0;
  double forwardS = 0;          // the loss included (in the last layer's times too)
  double backwardS = 0;
  double updateS = 0;
  // The timed steps' wall-clock time over their number (the update and the
  // moments the process was off its core included: CoreSharing.h's measure).
  double wallStepS = 0;
  std::vector<LayerTimes> layers;
};

struct ModelTimingConfig {
  std::string model = "mlp";
  int64_t microBatch = 8;
  int warmup = 2;
  int repeats = 5;              // timed steps at least (the median of each time is kept)
  double minSeconds = 0;        // and more, up to 4 x repeats, until the timed ones took this long
  // A window on the system clock (seconds since the epoch; 0: none): the timed
  // steps start at windowStartS and go on until windowEndS, however many that
  // takes, so that processes started together time the same moments (CoreSharing.h).
  double windowStartS = 0, windowEndS = 0;
};

// Builds the model (seed 1, default data shape), runs warm-up and timed
// steps on random inputs under the current precision and kernel threads.
// Throws UsageError for an unknown model.
ModelTimes profileModel(const ModelTimingConfig& config);

// Each time the median over passes of one model at one micro-batch size (the
// passes' layers alike): calibrate times every size in a few passes, a while
// apart, so that a slow moment of a shared machine slows one pass, not the
// size (timed once, a size's time can be off by more than half).
ModelTimes medianOfPasses(const std::vector<ModelTimes>& passes);

}  // namespace dtrain::calibrate
