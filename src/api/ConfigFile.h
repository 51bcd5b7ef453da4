#pragma once
// Config files: TOML with one table per option group and keys named after the
// flags (`[parallel] workers = 4`, `[optimizer] name = "adamw"`, `lr = 0.001`).
// Values are checked as flags are; every error is one line naming the file,
// line, key and problem. Flags given with --config override the file.
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "api/Schema.h"

namespace dtrain::api {

// Sets the file's options on rc and records where each came from.
void loadConfigFile(const std::string& path, RunConfig& rc, Sources& src);
// The same from TOML text; `name` stands for the file in messages.
void loadConfigText(const std::string& text, const std::string& name, RunConfig& rc, Sources& src);

// The options a prepared configuration uses, with their values, as TOML that
// reproduces the run (--print-config; the result line has them as JSON).
std::string configToToml(const RunConfig& rc);
// An option's value as JSON.
nlohmann::json toJson(const Value& v);

}  // namespace dtrain::api
