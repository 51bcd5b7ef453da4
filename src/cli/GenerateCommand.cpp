#include "cli/GenerateCommand.h"

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "core/Error.h"
#include "core/Timer.h"
#include "nn/Lora.h"
#include "nn/ModelRegistry.h"
#include "runtime/Checkpoint.h"
#include "runtime/Generate.h"
#include "runtime/Safetensors.h"
#include "runtime/Task.h"
#include "tensor/cpu/Blas.h"

namespace dtrain::cli {

namespace {

struct GenerateFlags {
  std::string load, prompt;
  runtime::GenerateOptions options;
  int threads = 1;
  std::string gemm = "auto";
};

void run(const GenerateFlags& f) {
  DTRAIN_CHECK_USAGE(std::filesystem::is_regular_file(f.load), "--load ", f.load,
                     ": no such checkpoint file");
  kernels::configureKernels(f.threads, kernels::parseGemmBackend(f.gemm));
  // The model's name and architecture are in the checkpoint's metadata.
  const runtime::SafetensorsFile file = runtime::loadSafetensors(f.load);
  const auto& metadata = file.metadata;
  // A LoRA run's checkpoint: its adapters are not the model's weights until merged.
  for (const auto& [tensor, t] : file.tensors)
    DTRAIN_CHECK_USAGE(!nn::isLoraParameter(tensor), "--load ", f.load,
                       ": this file holds LoRA adapters: merge them into the base weights first "
                       "(dtrain export --merge-lora ", f.load, " merged.safetensors), then --load that");
  auto name = metadata.find("model");
  DTRAIN_CHECK_USAGE(name != metadata.end(), "--load ", f.load,
                     ": the checkpoint does not name its model (save it with dtrain train --save)");
  const nn::ModelOverrides overrides = runtime::overridesFromMetadata(metadata);
  const nn::ModelInfo info = nn::modelInfo(name->second, overrides);
  DTRAIN_CHECK_USAGE(info.task == nn::kLanguageModelTask, "--load ", f.load, ": model '",
                     name->second, "' is not a language model (generate needs a gpt-* checkpoint)");
  auto model = nn::buildModel(name->second, overrides, 0);
  runtime::loadCheckpoint(f.load, *model, nullptr, nullptr);

  std::vector<int32_t> prompt(f.prompt.begin(), f.prompt.end());
  for (int32_t& t : prompt) t &= 0xff;  // bytes (char may be signed)
  // The prompt is echoed once generate() has accepted it (errors print nothing on stdout).
  bool echoed = false;
  auto echo = [&] {
    if (!echoed) std::fwrite(f.prompt.data(), 1, f.prompt.size(), stdout);
    echoed = true;
  };
  Timer clock;
  const auto tokens = runtime::generate(*model, info.blockSize, prompt, f.options, [&](int32_t t) {
    echo();
    std::fputc(t, stdout);
    std::fflush(stdout);
  });
  const double seconds = clock.seconds();
  echo();
  std::fputc('\n', stdout);
  std::fflush(stdout);
  const auto generated = static_cast<double>(tokens.size() - prompt.size());
  std::fprintf(stderr, "%.0f tokens in %.3f s: %.1f tokens/s\n", generated, seconds,
               generated / std::max(seconds, 1e-9));
}

}  // namespace

void addGenerateCommand(CLI::App& app) {
  auto f = std::make_shared<GenerateFlags>();
  CLI::App* sub = app.add_subcommand(
      "generate", "Sample text from a language-model checkpoint (stdout; tokens/s on stderr)");
  sub->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  sub->add_option("--load", f->load, "Checkpoint of dtrain train --model gpt-* --save")->required();
  sub->add_option("--prompt", f->prompt, "Text to continue (bytes; at most the model's block)")
      ->required();
  sub->add_option("--max-new-tokens", f->options.maxNewTokens, "Bytes to generate")
      ->capture_default_str();
  sub->add_option("--temperature", f->options.temperature, "Softmax temperature (0: greedy)")
      ->capture_default_str();
  sub->add_option("--top-k", f->options.topK, "Sample among the k likeliest bytes (0: all)")
      ->capture_default_str();
  sub->add_option("--seed", f->options.seed, "Seed of the sampling")->capture_default_str();
  sub->add_option("--threads", f->threads, "Intra-op threads")->capture_default_str();
  sub->add_option("--gemm", f->gemm, "Matrix products on: auto, onednn, openblas")
      ->capture_default_str();
  sub->add_flag("!--no-kv-cache", f->options.kvCache,
                "Run the whole context for every token (no key/value cache), for comparison");
  sub->callback([f] { run(*f); });
}

}  // namespace dtrain::cli
