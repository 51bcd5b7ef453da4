// Machine files (dtrain simulate / plan --machine, plan/Machine.h): JSON with
// comments, keys checked at every level, numbers' kinds and signs; a file that
// passes is simulated for two configurations (data parallel; a pipeline with
// calibrated times if the file has them), which must not crash on any values
// the checks let through.
#include "api/Train.h"
#include "fuzz/FuzzInput.h"
#include "plan/Machine.h"
#include "plan/Simulator.h"

namespace {

const std::vector<dtrain::api::RunConfig>& machineFuzzConfigs() {
  static const std::vector<dtrain::api::RunConfig> configs = [] {
    using dtrain::api::RunConfig;
    RunConfig dp;
    dp.train.model = "gpt-tiny";
    dp.train.workers = 2;
    dp.train.zero = 3;
    RunConfig pipe;
    pipe.train.model = "gpt-tiny";
    pipe.train.backend = "mpi";
    pipe.train.workers = 4;
    pipe.train.pipelineStages = 2;
    pipe.train.microBatches = 4;
    std::vector<RunConfig> out;
    for (RunConfig rc : {dp, pipe}) out.push_back(dtrain::api::prepared(rc, dtrain::api::sourcesFromValues(rc)));
    return out;
  }();
  return configs;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  dtrain::fuzz::expectErrorsOnly([&] {
    const dtrain::plan::Machine m = dtrain::plan::parseMachine(text, "fuzz.json");
    for (const auto& rc : machineFuzzConfigs()) {
      dtrain::plan::SimulateOptions o;
      o.hosts = 2;
      volatile double step = dtrain::plan::simulate(rc, m, o).stepS;
      (void)step;
    }
  });
  return 0;
}
