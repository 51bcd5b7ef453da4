#include "cli/ExportCommand.h"

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/Error.h"
#include "nn/Lora.h"
#include "runtime/LoraSetup.h"
#include "runtime/Safetensors.h"

namespace dtrain::cli {
namespace {

struct ExportFlags {
  std::vector<std::string> mergeLora;  // IN OUT
  std::string adapters;
};

void mergeLoraFile(const ExportFlags& f) {
  const std::string& in = f.mergeLora.at(0);
  const std::string& out = f.mergeLora.at(1);
  runtime::SafetensorsFile file = runtime::loadSafetensors(in);
  std::vector<std::pair<std::string, Tensor>> tensors;
  // Training state is dropped: the output is a model, not a run to resume.
  for (auto& [name, t] : file.tensors)
    if (!name.starts_with("optimizer.") && !name.starts_with("strategy.")) tensors.emplace_back(name, t);
  std::map<std::string, std::string> meta = file.metadata;
  std::string scaleSource = in;
  if (!f.adapters.empty()) {
    runtime::SafetensorsFile a = runtime::loadSafetensors(f.adapters);
    for (auto& [name, t] : a.tensors) {
      DTRAIN_CHECK_USAGE(nn::isLoraParameter(name), "--adapters ", f.adapters, ": ", name,
                         " is not a LoRA adapter");
      DTRAIN_CHECK_USAGE(!file.find(name), "--adapters: ", in, " already holds ", name);
      tensors.emplace_back(name, t);
    }
    meta = a.metadata;
    scaleSource = f.adapters;
  }
  size_t adapters = 0;
  for (auto& [name, t] : tensors) adapters += nn::isLoraParameter(name);
  DTRAIN_CHECK_USAGE(adapters > 0, "--merge-lora: ", in,
                     " holds no LoRA adapters (name a LoRA run's --save, or add --adapters FILE)");
  const double scale = runtime::loraScaleFromMetadata(meta, scaleSource);
  nn::mergeLora(tensors, scale);
  std::map<std::string, std::string> plain;
  for (const auto& [k, v] : file.metadata)
    if (!k.starts_with("dtrain.") && !k.starts_with("lora_")) plain[k] = v;
  runtime::saveSafetensors(out, tensors, plain);
  std::cout << nlohmann::json{{"merged_layers", adapters / 2},
                              {"scale", scale},
                              {"tensors", tensors.size()},
                              {"out", out}}
                   .dump()
            << std::endl;
}

}  // namespace

void addExportCommand(CLI::App& app) {
  auto flags = std::make_shared<ExportFlags>();
  CLI::App* sub = app.add_subcommand("export", "Write a checkpoint in another form (prints one JSON line)");
  sub->add_option("--merge-lora", flags->mergeLora,
                  "IN OUT: fold IN's LoRA adapters into the base weights, write a plain checkpoint")
      ->expected(2)
      ->required();
  sub->add_option("--adapters", flags->adapters,
                  "Adapters saved with --save-adapters, merged into IN (a base checkpoint)");
  sub->callback([flags] { mergeLoraFile(*flags); });
}

}  // namespace dtrain::cli
