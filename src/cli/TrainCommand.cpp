#include "cli/TrainCommand.h"

#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>


#include "api/ConfigFile.h"
#include "api/Schema.h"
#include "api/Train.h"
#include "cli/RunDir.h"
#include "cli/PredictionDrift.h"
#include "cli/RunSummary.h"
#include "comm/HangReport.h"
#include "core/StopSignal.h"
#include "plan/Machine.h"
#include "plan/Simulator.h"

namespace dtrain::cli {

namespace {

// What CLI11 fills while parsing: each schema option's raw texts (parsed and
// checked by the schema, so flags and config files share one path), the
// config file and --print-config.
struct TrainFlags {
  std::vector<std::vector<std::string>> texts;  // per schema option, in schema order
  std::vector<std::string> usedFlag;            // which of a boolean's two flags was given
  std::string configFile;
  bool printConfig = false;
  RunDirRequest runDir;
};

void run(const TrainFlags& f) {
  api::RunConfig rc;
  api::Sources src;
  if (!f.configFile.empty()) api::loadConfigFile(f.configFile, rc, src);
  // Flags override the file.
  const auto& options = api::schema().options();
  for (size_t i = 0; i < options.size(); ++i) {
    const api::Option& o = options[i];
    if (f.texts[i].empty()) continue;
    const std::string& flag = f.usedFlag[i];
    api::setChecked(rc, src, o, api::parseText(o, flag, f.texts[i]), flag);
  }
  if (f.printConfig) {
    std::cout << api::configToToml(api::prepared(rc, src));
    return;
  }
  // The configuration as given (before the run directory's own paths go in): a
  // config.toml that reruns it writes its metrics where the new run says.
  const std::string configToml =
      f.runDir.dir.empty() ? std::string() : api::configToToml(api::prepared(rc, src));
  const RunDir runDir(f.runDir, rc);
  // Ctrl-C / SIGTERM: the ranks finish the step, save and stop (core/StopSignal.h);
  // the reporter says where in one line, and main exits 128 + the signal.
  stop::SignalScope signals;
  // --machine: the simulator's prediction for this very configuration, on the
  // result line next to what was measured (drift shows in every run). Before
  // training, so a bad machine file is refused at once.
  std::optional<plan::Prediction> predicted;
  if (!rc.train.machine.empty())
    predicted = plan::simulate(api::prepared(rc, src), plan::readMachine(rc.train.machine));
  // A hang (or SIGUSR2) writes each rank's last calls here (comm/HangReport.h);
  // SIGUSR2's handler is in place once the run directory has its config.
  comm::flight::enableReports(!f.runDir.dir.empty() ? f.runDir.dir : rc.train.checkpointDir);
  runDir.writeStart(configToml, rc.train.machine);
  nlohmann::json out = api::train(rc, src);
  if (const stop::Stopped s = stop::stopped(); s.stopped) {
    if (s.reporter) std::fprintf(stderr, "dtrain: %s\n", stop::describe(s).c_str());
    return;
  }
  if (!out.is_null() && predicted) {
    out["predicted_step_s"] = predicted->stepS;
    out["predicted_samples_per_s"] = predicted->samplesPerS;
    compareWithPrediction(out, *predicted);  // a phase > 25% off: one line, and "drift"
  }
  if (out.is_null()) return;
  runDir.writeResult(out);
  std::fprintf(stderr, "%s\n", runSummary(out).c_str());  // for people
  std::cout << out.dump() << std::endl;  // the reporting rank's line, for machines
}

// The CLI11 type shown in --help: the choices, or the value's kind.
std::string typeName(const api::Option& o) {
  if (o.choices) {
    std::string names;
    for (const auto& n : o.choices()) names += (names.empty() ? "" : ",") + n;
    return "{" + names + "}";
  }
  switch (o.kind) {
    case api::Kind::Int: return o.zeroWord.empty() ? "INT" : "INT|" + o.zeroWord;
    case api::Kind::Float: return "FLOAT";
    case api::Kind::IntList: return "INT,...";
    case api::Kind::FloatList: return "FLOAT,...";
    default: return "TEXT";
  }
}

}  // namespace

void addTrainCommand(CLI::App& app) {
  auto flags = std::make_shared<TrainFlags>();
  CLI::App* sub = app.add_subcommand("train", "Train a model (prints one JSON line at the end)");
  sub->add_option("--config", flags->configFile,
                  "Read options from a TOML file ([group] key = value; flags override it)");
  sub->add_flag("--print-config", flags->printConfig,
                "Print the effective configuration as TOML (a file that reproduces the run) "
                "and exit without training");
  sub->add_option("--run-dir", flags->runDir.dir,
                  "Write the run into DIR: config.toml, metrics.jsonl (as it goes), result.json, "
                  "machine.json with --machine; `dtrain dashboard DIR` shows it")
      ->group("Logging and metrics");
  sub->add_flag("--run-timeline", flags->runDir.timeline,
                "With --run-dir: write the timeline (as --timeline) into DIR/timeline.json")
      ->group("Logging and metrics");
  const auto& options = api::schema().options();
  flags->texts.resize(options.size());
  flags->usedFlag.resize(options.size());
  const api::RunConfig defaults;
  for (size_t i = 0; i < options.size(); ++i) {
    const api::Option& o = options[i];
    const std::string title = api::schema().group(o.group)->title;
    if (o.kind == api::Kind::Bool) {
      // A flag without a value: --nesterov sets true, --no-shuffle sets false.
      for (const std::string& name : {o.flag, o.negFlag}) {
        if (name.empty()) continue;
        const bool positive = name == o.flag;
        std::string help = o.help;
        if (!positive && !o.flag.empty()) help = "Turns off " + o.flag;
        sub->add_flag_function(name, [flags, i, name](int64_t) {
              flags->texts[i] = {"true"};
              flags->usedFlag[i] = name;
            }, help)
            ->group(title);
      }
      continue;
    }
    // Raw texts: the schema parses and checks them, as it does a config file's values.
    CLI::Option* opt = nullptr;
    if (o.repeatable) {
      opt = sub->add_option(o.flag, flags->texts[i], o.help);
      opt->allow_extra_args(false)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    } else {
      // A repeated flag takes its last value, as most command-line tools do.
      opt = sub->add_option_function<std::string>(
          o.flag, [flags, i](const std::string& text) { flags->texts[i] = {text}; }, o.help);
      opt->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    }
    flags->usedFlag[i] = o.flag;
    opt->group(title)->type_name(typeName(o));
    if (const auto v = o.get(defaults)) {
      std::string text = api::toToml(*v);
      if (o.kind == api::Kind::String && text.size() >= 2) text = text.substr(1, text.size() - 2);
      opt->default_str(text);
    }
  }
  sub->callback([flags] { run(*flags); });
}

}  // namespace dtrain::cli
