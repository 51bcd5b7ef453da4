// The configuration schema: config files' errors name file, line, key and
// problem; every option of every strategy is either used or refused; the
// printed configuration reproduces the run's.
#include <gtest/gtest.h>

#include <cmath>

#include "api/ConfigFile.h"
#include "api/PrepareConfig.h"
#include "api/Schema.h"
#include "api/StrategyRegistry.h"
#include "core/Error.h"

using namespace dtrain;
using namespace dtrain::api;

namespace {

// The UsageError message of loading `text` as run.toml and preparing it ("" if none).
std::string loadError(const std::string& text) {
  RunConfig rc;
  Sources src;
  try {
    loadConfigText(text, "run.toml", rc, src);
    prepare(rc, src, true);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(ConfigFile, SetsOptionsOfEachGroup) {
  RunConfig rc;
  Sources src;
  loadConfigText(R"(
[optimizer]
name = "adamw"
lr = 0.001
adam_betas = [0.9, 0.95]
[parallel]
workers = 4
[training]
batch_size = 32
[faults]
straggler = ["1:20"]
)", "run.toml", rc, src);
  EXPECT_EQ(rc.train.optimizer, "adamw");
  EXPECT_DOUBLE_EQ(rc.train.lr, 0.001);
  EXPECT_DOUBLE_EQ(*rc.train.beta2, 0.95);
  EXPECT_EQ(rc.train.workers, 4);
  EXPECT_EQ(rc.train.batchSize, 32);
  EXPECT_DOUBLE_EQ(rc.train.stragglerMs.at(1), 20.0);
  EXPECT_EQ(src.where.at("training.batch_size"), "run.toml:9: [training] batch_size");
}

TEST(ConfigFile, UnknownKeySuggestsTheNearest) {
  EXPECT_EQ(loadError("[training]\nbatch_sise = 3\n"),
            "run.toml:2: unknown key 'batch_sise' in [training]; did you mean batch_size?");
  // A key of another group.
  EXPECT_EQ(loadError("[training]\nworkers = 3\n"),
            "run.toml:2: unknown key 'workers' in [training]; did you mean [parallel] workers?");
  // A key of several other groups: each of them.
  EXPECT_EQ(loadError("[parallel]\nservers = 1\n"),
            "run.toml:2: unknown key 'servers' in [parallel]; did you mean [ps] servers or "
            "[sandblaster] servers?");
}

TEST(ConfigFile, UnknownGroupAndTopLevelKeys) {
  EXPECT_NE(loadError("[trainign]\nepochs = 3\n").find("run.toml:1: unknown group [trainign]; did you mean [training]?"),
            std::string::npos);
  EXPECT_NE(loadError("lr = 0.1\n").find("did you mean [optimizer] lr?"), std::string::npos);
}

TEST(ConfigFile, WrongTypeAndRange) {
  EXPECT_EQ(loadError("[training]\n\nbatch_size = \"big\"\n"),
            "run.toml:3: [training] batch_size: expected an integer, got a string");
  EXPECT_EQ(loadError("[training]\nbatch_size = 0\n"),
            "run.toml:2: [training] batch_size must be >= 1 (got 0)");
  EXPECT_EQ(loadError("[optimizer]\nname = \"rmsprop\"\n").substr(0, 58),
            "run.toml:2: unknown [optimizer] name 'rmsprop' (known: sgd");
  EXPECT_NE(loadError("[optimizer]\nlr = nan\n").find("run.toml:2: [optimizer] lr must be a finite number"),
            std::string::npos);
}

TEST(ConfigFile, SyntaxErrorNamesTheLine) {
  EXPECT_EQ(loadError("[training]\nepochs = = 3\n").rfind("run.toml:2: ", 0), 0u);
}

TEST(ConfigFile, KeyOfAGroupTheStrategyDoesNotUseIsRefused) {
  EXPECT_EQ(loadError("[parallel]\nworkers = 2\n[ps]\nservers = 2\n"),
            "run.toml:4: [ps] servers does not apply to --strategy allreduce (only to --strategy ps)");
  EXPECT_EQ(loadError("[optimizer]\nstep_size = 10\n"),
            "run.toml:2: [optimizer] step_size applies to --schedule step");
}

TEST(ConfigFile, CrossOptionValidationSaysWhere) {
  const std::string e = loadError("[parallel]\nworkers = 2\npipeline_stages = 2\nmicro_batches = 5\n");
  EXPECT_EQ(e.rfind("run.toml:", 0), 0u) << e;
  EXPECT_NE(e.find("--micro-batches"), std::string::npos) << e;
}

TEST(PrintConfig, ReproducesTheConfiguration) {
  RunConfig rc;
  Sources src;
  loadConfigText("[model]\nname = \"gpt-tiny\"\n[parallel]\nworkers = 2\n[compress]\nname = \"topk\"\nratio = 0.05\n",
                 "a.toml", rc, src);
  prepare(rc, src, true);
  const std::string printed = configToToml(rc);
  RunConfig again;
  Sources src2;
  loadConfigText(printed, "printed.toml", again, src2);
  prepare(again, src2, true);
  EXPECT_EQ(configToToml(again), printed);
  // The model's defaults (gpt: adamw, text) are in it, and the strategy it implied.
  EXPECT_NE(printed.find("name = \"adamw\""), std::string::npos) << printed;
  EXPECT_NE(printed.find("strategy = \"allreduce\""), std::string::npos) << printed;
  EXPECT_NE(printed.find("ratio = 0.05"), std::string::npos) << printed;
  EXPECT_EQ(printed.find("[ps]"), std::string::npos) << printed;
}

namespace {

// A valid value other than the default, for the walk below.
Value otherValue(const Option& o, const RunConfig& defaults) {
  const std::optional<Value> d = o.get(defaults);
  switch (o.kind) {
    case Kind::Bool: return d ? !std::get<bool>(*d) : true;
    case Kind::Int: {
      int64_t v = d ? std::get<int64_t>(*d) + 1 : 2;
      if (o.min && v < *o.min) v = static_cast<int64_t>(*o.min) + 1;
      if (o.max && v > *o.max) v = static_cast<int64_t>(*o.max);
      return v;
    }
    case Kind::Float: {
      if (o.min && o.max) return (*o.min + *o.max) / 2;
      return d ? std::get<double>(*d) + 0.5 : 0.5;
    }
    case Kind::String: {
      if (o.choices)
        for (const auto& c : o.choices())
          if (!d || c != std::get<std::string>(*d)) return c;
      return std::string("/tmp/dtrain-walk-value");
    }
    case Kind::IntList: return std::vector<int64_t>{2};
    case Kind::FloatList: return std::vector<double>{0.9, 0.95};
    case Kind::StringList: return std::vector<std::string>{"1:5"};
  }
  return true;
}

// The options that make a run use `strategy`.
void chooseStrategy(const std::string& strategy, RunConfig& rc, Sources& src) {
  auto set = [&](const char* group, const char* key, Value v) {
    setChecked(rc, src, *schema().find(group, key), v, std::string("--") + key);
  };
  if (strategy == "pipeline") return set("parallel", "pipeline_stages", int64_t{2});
  if (strategy == "tensor") return set("parallel", "tensor_parallel", int64_t{2});
  if (strategy != "single") set("parallel", "strategy", strategy);
  if (strategy != "single" && strategy != "fedavg") set("parallel", "workers", int64_t{2});
}

}  // namespace

// Every option against every strategy: given a valid non-default value, it is
// either used (prepare accepts it and the effective configuration carries it)
// or refused with a line naming it. Nothing is silently ignored.
TEST(OptionWalk, EveryOptionIsUsedOrRefusedUnderEveryStrategy) {
  const RunConfig defaults;
  int used = 0, refused = 0;
  for (const std::string& strategy : strategyNames()) {
    for (const Option& o : schema().options()) {
      if (o.id() == "parallel.strategy") continue;  // chooses the strategy itself
      RunConfig rc;
      Sources src;
      chooseStrategy(strategy, rc, src);
      if (src.given(o)) continue;
      const Value v = otherValue(o, defaults);
      try {
        setChecked(rc, src, o, v, o.name());
        prepare(rc, src, true);
      } catch (const UsageError& e) {
        // Refused: the line names the option (or the option it needs).
        EXPECT_NE(std::string(e.what()).find("--"), std::string::npos)
            << strategy << " " << o.name() << ": " << e.what();
        ++refused;
        continue;
      }
      EXPECT_EQ(unusedBecause(o, rc), "") << strategy << " " << o.name();
      const std::string printed = configToToml(rc);
      EXPECT_NE(printed.find("\n" + o.key + " = "), std::string::npos)
          << strategy << " accepted " << o.name() << " but the effective configuration lacks it:\n"
          << printed;
      ++used;
    }
  }
  EXPECT_GT(used, 100);
  EXPECT_GT(refused, 100);
}

// Refusals of options the chosen strategy or the other options make meaningless.
TEST(OptionWalk, OptionsOfAnotherStrategyAreRefused) {
  auto refusal = [](std::vector<std::pair<std::string, std::string>> flags) {
    RunConfig rc;
    Sources src;
    try {
      for (const auto& [flag, text] : flags) {
        const Option* o = schema().findFlag(flag);
        if (!o) return "no flag " + flag;
        setChecked(rc, src, *o, parseText(*o, flag, {text}), flag);
      }
      prepare(rc, src, true);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(refusal({{"--servers", "2"}, {"--consistency", "async"}}),
            "--servers does not apply to --strategy single (only to --strategy ps)");
  EXPECT_EQ(refusal({{"--workers", "2"}, {"--push-every", "2"}}),
            "--push-every does not apply to --strategy allreduce (only to --strategy ps)");
  EXPECT_EQ(refusal({{"--pipeline-schedule", "gpipe"}}), "--pipeline-schedule applies to --pipeline-stages P > 1");
  EXPECT_EQ(refusal({{"--placement", "spread"}}),
            "--placement applies to meshes (--pipeline-stages or --tensor-parallel)");
  EXPECT_EQ(refusal({{"--gamma", "0.5"}}), "--gamma applies to --schedule step");
  EXPECT_EQ(refusal({{"--eval-batches", "5"}}), "--eval-batches applies to the gpt-* models");
  EXPECT_EQ(refusal({{"--checkpoint-dir", "/tmp/x"}}), "");  // where a Ctrl-C saves
  EXPECT_EQ(refusal({{"--strategy", "fedavg"}, {"--checkpoint-dir", "/tmp/x"}}),
            "--checkpoint-dir does not apply to --strategy fedavg (--save writes the global model at the end)");
  EXPECT_EQ(refusal({{"--strategy", "fedavg"}, {"--batch-size", "8"}}),
            "--batch-size does not apply to --strategy fedavg (use --local-batch)");
  EXPECT_EQ(refusal({{"--rounds", "3"}}),
            "--rounds does not apply to --strategy single (only to --strategy fedavg)");
  EXPECT_EQ(refusal({{"--strategy", "ps"}, {"--workers", "2"}, {"--staleness", "2"}}),
            "--staleness applies to --consistency ssp");
  EXPECT_EQ(refusal({{"--strategy", "ps"}, {"--workers", "2"}, {"--consistency", "ssp"}, {"--staleness", "2"}}), "");
}

TEST(Schema, DefaultsAreValid) {
  RunConfig rc;
  Sources src;
  prepare(rc, src, true);  // throws on a default outside its own option's range
  for (const Option& o : schema().options())
    if (const auto v = o.get(rc)) {
      EXPECT_EQ(checkValue(o, *v), "") << o.name();
    }
}

TEST(Flags, TextsParseByKind) {
  const Option& split = *schema().findFlag("--pipeline-split");
  EXPECT_EQ(std::get<std::vector<int64_t>>(parseText(split, "--pipeline-split", {"2,4"})),
            (std::vector<int64_t>{2, 4}));
  const Option& shuffle = *schema().findFlag("--no-shuffle");
  EXPECT_FALSE(std::get<bool>(parseText(shuffle, "--no-shuffle", {"true"})));
  EXPECT_THROW(parseText(*schema().findFlag("--epochs"), "--epochs", {"many"}), UsageError);
  EXPECT_EQ(editDistance("kitten", "sitting"), 3u);
}
