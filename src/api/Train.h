#pragma once
// The library's one call: train a configuration under its strategy, as
// `dtrain train` does, and get the result line's JSON back. The model is any
// registered one (nn::registerModel adds a program's own); the data is loaded
// by the configuration ([data]) or handed over in memory.
//
//   dtrain::nn::registerModel("my-net", dtrain::nn::classifier(buildMyNet));
//   dtrain::api::RunConfig config = dtrain::api::configFromToml(text);  // or fields set in code
//   config.train.model = "my-net";
//   nlohmann::json result = dtrain::api::train(config);                 // result["test_accuracy"]
#include <string>

#include <nlohmann/json.hpp>

#include "api/RunConfig.h"
#include "api/Schema.h"
#include "runtime/Task.h"

namespace dtrain::api {

// Data in memory: train/test datasets (classifiers, e.g. data::TensorDataset)
// or a text corpus (language models). Empty members: the configuration's data.
using Data = runtime::TaskData;

// Trains under the configuration's strategy: ranks as threads (backend local)
// or this process's rank under mpirun (backend mpi). Options whose value
// differs from the defaults count as given: the model's own defaults apply to
// the others, and one the run would not use is refused (UsageError), as for
// flags. Returns the result line (null on the ranks of an mpi run that do not report).
nlohmann::json train(RunConfig config, Data data = {});
// The same, with where each option came from (flags, config files: the CLI),
// so that refusals and errors name them.
nlohmann::json train(RunConfig config, const Sources& sources, Data data = {});

// Completes and checks a configuration without training (--print-config).
RunConfig prepared(RunConfig config, const Sources& sources);

// A configuration from TOML text or a file (the defaults, then its keys).
RunConfig configFromToml(const std::string& text, const std::string& name = "config");
RunConfig configFromFile(const std::string& path);

// Sources for a configuration built in code: every option whose value differs
// from the default's, named by its flag.
Sources sourcesFromValues(const RunConfig& config);

}  // namespace dtrain::api
