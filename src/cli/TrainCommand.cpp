#include "cli/TrainCommand.h"

#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <cstdlib>

#include "api/ConfigFile.h"
#include "api/Prepare.h"
#include "api/RankRunner.h"
#include "api/Schema.h"
#include "api/StrategyRegistry.h"
#include "cli/FederatedRun.h"
#include "cli/ResultLine.h"
#include "comm/Registry.h"
#include "comm/local/Local.h"
#include "core/Timer.h"
#include "runtime/CheckpointDir.h"
#include "runtime/Timeline.h"
#include "runtime/Trainer.h"
#include "tensor/cpu/Blas.h"

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
};

// True when this process was started by mpirun (OpenMPI or another PMI launcher).
bool underMpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
    if (std::getenv(v)) return true;
  return false;
}

// --workers N --backend local: the ranks (workers, and servers for ps) as
// threads of this process, sharing one copy of the datasets and one timeline.
void runLocal(const api::RunConfig& rc) {
  const runtime::TrainConfig& c = rc.train;
  // Process-wide: each rank's kernels use c.threads threads (default 1 per worker).
  kernels::configureKernels(c.threads, kernels::parseGemmBackend(c.gemm));
  runtime::Timeline timeline;
  api::SharedRun shared;
  shared.data = runtime::loadTaskData(c, true);
  if (!c.timeline.empty()) shared.timeline = &timeline;
  if (c.strategy == "hogwild") shared.hogwild = std::make_shared<parallel::HogwildShared>(c.workers);
  timeline.setOrigin(nowMicros());
  std::optional<runtime::TrainResult> result;
  std::mutex resultMutex;
  comm::local::runLocal(api::worldSizeFor(c), [&](comm::Communicator& comm) {
    auto r = api::runRank(c, comm, shared);
    std::lock_guard<std::mutex> lock(resultMutex);
    if (r) result = std::move(r);
  });
  DTRAIN_CHECK(result, "no rank reported a result");
  if (!c.timeline.empty()) timeline.write(c.timeline);
  nlohmann::json out = result->toJson();
  addRunFields(out, rc, c.workers, "local");
  std::cout << out.dump() << std::endl;
}

// One rank of `mpirun -np N dtrain train --backend mpi`.
void runMpiRank(api::RunConfig rc, bool workersGiven) {
  runtime::TrainConfig& c = rc.train;
  DTRAIN_CHECK_USAGE(comm::hasBackend("mpi"),
                     "--backend mpi: this dtrain was built without MPI (install libopenmpi-dev "
                     "and openmpi-bin, then reconfigure with -DDTRAIN_WITH_MPI=ON)");
  DTRAIN_CHECK_USAGE(underMpirun(), "--backend mpi runs one process per rank under mpirun: "
                     "mpirun -np N dtrain train --backend mpi ... (or use --backend local "
                     "--workers N)");
  std::unique_ptr<comm::Communicator> comm;
  try {
    comm = comm::makeCommunicator("mpi");
    // The ranks beyond the workers (parameter servers) come first.
    const int servers = api::strategyEntry(c.strategy).worldSize(c) - c.workers;
    DTRAIN_CHECK_USAGE(comm->size() > servers, "--servers ", servers, " leaves no worker among mpirun's ",
                       comm->size(), " processes (mpirun -np S+W: the first S serve)");
    DTRAIN_CHECK_USAGE(!workersGiven || c.workers == comm->size() - servers, "--workers ", c.workers,
                       " does not match mpirun's ", comm->size(), " processes",
                       servers ? detail::concat(" minus ", servers, " servers") : std::string(),
                       " (with --backend mpi, mpirun -np sets the workers)");
    c.workers = comm->size() - servers;
    c.validate();
    runtime::Timeline timeline;
    comm->barrier();  // aligns the ranks' timeline clocks
    timeline.setOrigin(nowMicros());
    api::SharedRun shared;
    if (!c.timeline.empty()) shared.timeline = &timeline;
    std::optional<runtime::TrainResult> result = api::runRank(c, *comm, shared);
    if (!c.timeline.empty()) {
      // Rank 0 writes every rank's events: gather the serialized parts.
      std::string mine = timeline.serialize();
      int64_t len = static_cast<int64_t>(mine.size());
      std::vector<int64_t> lens(comm->size());
      comm->allgather(&len, lens.data(), 1, DType::I64);
      std::vector<size_t> counts(lens.begin(), lens.end());
      size_t totalLen = 0;
      for (size_t n : counts) totalLen += n;
      std::string all(totalLen, '\0');
      comm->allgatherv(mine.data(), all.data(), counts, DType::U8);
      if (comm->rank() == 0) {
        std::vector<std::string> parts;
        for (size_t off = 0, r = 0; r < counts.size(); off += counts[r], ++r)
          parts.push_back(all.substr(off, counts[r]));
        runtime::Timeline::write(c.timeline, parts);
      }
    }
    comm.reset();
    if (result) {
      nlohmann::json out = result->toJson();
      addRunFields(out, rc, c.workers, "mpi");
      std::cout << out.dump() << std::endl;
    }
    comm::shutdown(0);
  } catch (const std::exception& e) {
    // With several ranks this aborts the job at once (the others would wait for
    // their timeouts); with one, MPI is finalized and main prints the error.
    const bool usage = dynamic_cast<const UsageError*>(&e) != nullptr;
    comm.reset();
    comm::shutdown(usage ? 2 : 1, std::string("dtrain: error: ") + e.what());
    throw;
  }
}

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
  const bool mpi = rc.train.backend == "mpi";
  // Under mpi the workers are known only once MPI is up (runMpiRank validates again).
  api::prepare(rc, src, !mpi);
  if (f.printConfig) {
    std::cout << api::configToToml(rc);
    return;
  }
  runtime::resolveCheckpointFlags(rc.train);  // --resume -> --load, --checkpoint-dir made
  const runtime::TrainConfig& c = rc.train;
  if (!api::strategyEntry(c.strategy).make) return runFederated(rc);  // runs its own rounds
  if (mpi) return runMpiRank(rc, src.givenFlag("--workers"));
  if (c.strategy != "single") return runLocal(rc);

  runtime::Trainer trainer(c, std::make_unique<parallel::SingleProcess>());
  runtime::Timeline timeline;
  timeline.setOrigin(nowMicros());
  if (!c.timeline.empty()) trainer.setTimeline(&timeline);
  runtime::TrainResult r = trainer.run();
  if (!c.timeline.empty()) timeline.write(c.timeline);
  nlohmann::json out = r.toJson();
  addRunFields(out, rc, 1, "none");
  std::cout << out.dump() << std::endl;
}

// The CLI11 type shown in --help: the choices, or the value's kind.
std::string typeName(const api::Option& o) {
  if (o.choices) {
    std::string names;
    for (const auto& n : o.choices()) names += (names.empty() ? "" : ",") + n;
    return "{" + names + "}";
  }
  switch (o.kind) {
    case api::Kind::Int: return "INT";
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
