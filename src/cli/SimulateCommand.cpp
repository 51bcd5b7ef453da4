#include "cli/SimulateCommand.h"

#include <iostream>
#include <memory>
#include <string>

#include "api/ConfigFile.h"
#include "api/Train.h"
#include "plan/Machine.h"
#include "plan/PredictionOutput.h"
#include "plan/Simulator.h"

namespace dtrain::cli {

namespace {

struct SimulateFlags {
  std::string config, machine, timeline;
  int hosts = 0;
};

void runSimulate(const SimulateFlags& f) {
  const plan::Machine machine = plan::readMachine(f.machine);
  api::RunConfig rc;
  api::Sources src;
  api::loadConfigFile(f.config, rc, src);
  rc = api::prepared(rc, src);  // the trainer's own checks: the run it predicts is one it would run
  plan::SimulateOptions o;
  o.hosts = f.hosts;
  const plan::Prediction p = plan::simulate(rc, machine, o);
  if (!f.timeline.empty()) plan::writePredictedTimeline(f.timeline, p);
  nlohmann::json line = plan::predictionJson(p);
  line["machine"] = machine.name;
  line["model"] = rc.train.model;
  std::cout << line.dump() << std::endl;
}

}  // namespace

void addSimulateCommand(CLI::App& app) {
  auto flags = std::make_shared<SimulateFlags>();
  CLI::App* sub = app.add_subcommand(
      "simulate", "Predict a configuration's step time, memory and traffic on a machine (one JSON line)");
  sub->add_option("--config", flags->config, "The run's configuration (TOML, as dtrain train --config)")
      ->required();
  sub->add_option("--machine", flags->machine,
                  "Machine file (dtrain calibrate's output or a cluster description, "
                  "docs/guide/machine-files.md)")
      ->required();
  sub->add_option("--timeline", flags->timeline, "Write the predicted step as a Chrome trace (JSON)");
  sub->add_option("--hosts", flags->hosts,
                  "backend mpi: hosts the ranks are spread over (default: the machine file's)")
      ->check(CLI::PositiveNumber);
  sub->callback([flags] { runSimulate(*flags); });
}

}  // namespace dtrain::cli
