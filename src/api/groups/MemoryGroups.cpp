// [memory] (ZeRO, offload, recomputation) and [lora].
#include "api/Schema.h"
#include "api/groups/Conditions.h"

namespace dtrain::api {

using runtime::TrainConfig;

void addMemoryOptions(Schema& s) {
  s.addGroup("memory", "Memory: ZeRO, offload, recomputation");
  s.add("memory", "zero", "--zero",
        "ZeRO stage on the allreduce strategy: 1 shards the optimizer state, 2 also the "
        "gradients, 3 also the parameters (0: off); 1 and 2 also on the data-parallel replicas "
        "of --pipeline-stages and --tensor-parallel")
      .train(&TrainConfig::zero).range(0, 3);
  s.add("memory", "offload", "--offload",
        "Keep on disk between uses: none, optimizer (its state) or params (with --zero 3, the "
        "parameter shards too)")
      .train(&TrainConfig::offload).oneOf({"none", "optimizer", "params"}).result("offload");
  s.add("memory", "offload_dir", "--offload-dir",
        "Directory for --offload's (unnamed) file (default: <cache dir>/offload)")
      .train(&TrainConfig::offloadDir)
      .when([](const RunConfig& rc) {
        return unlessThen(rc.train.offload != "none", "needs --offload optimizer or params");
      });
  s.add("memory", "recompute", "--recompute",
        "Activation recomputation: none, blocks (each transformer block / layer) or all (each "
        "block's sub-layers)")
      .train(&TrainConfig::recompute).oneOf({"none", "blocks", "all"});
}

void addLoraOptions(Schema& s) {
  s.addGroup("lora", "LoRA");
  s.add("lora", "rank", "--lora-rank",
        "LoRA: train rank-R adapters of the targeted Linear layers, everything else frozen")
      .train(&TrainConfig::loraRank).range(1);
  auto withLora = [](const RunConfig& rc) {
    return unlessThen(rc.train.loraRank.has_value(), "needs --lora-rank R (LoRA is off without it)");
  };
  s.add("lora", "alpha", "--lora-alpha", "LoRA: scale alpha (updates are alpha/R x B A; default 8)")
      .train(&TrainConfig::loraAlpha).above(0).when(withLora);
  s.add("lora", "targets", "--lora-targets",
        "LoRA: attn, mlp or attn,mlp (default: every target the model has)")
      .train(&TrainConfig::loraTargets).when(withLora);
  s.add("lora", "save_adapters", "--save-adapters", "LoRA: write the adapters alone to FILE at the end")
      .train(&TrainConfig::saveAdapters).when(withLora);
  s.add("lora", "load_adapters", "--load-adapters",
        "LoRA: start from adapters saved with --save-adapters")
      .train(&TrainConfig::loadAdapters).when(withLora);
}

}  // namespace dtrain::api
