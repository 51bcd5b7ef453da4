#pragma once
// The human line a finished `dtrain train` prints on stderr before its result
// line (the JSON for machines, the contract, stays stdout's last line):
// "dtrain: mlp, 50 steps (6 epochs) in 1.2 s, 20813 samples/s; test accuracy
// 0.912 (loss 0.310); saved m.safetensors; checkpoints in ckpt; metrics m.jsonl".
#include <string>

#include <nlohmann/json.hpp>

namespace dtrain::cli {

std::string runSummary(const nlohmann::json& result);

}  // namespace dtrain::cli
