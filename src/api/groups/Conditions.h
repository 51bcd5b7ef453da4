#pragma once
// Small predicates the option groups use to say when an option means something.
#include <string>

#include "api/RunConfig.h"

namespace dtrain::api {

bool isLanguageModel(const RunConfig& rc);  // the model's task is language modeling
// "" when cond holds, else `why` (the shape of Option::unusedBecause).
inline std::string unlessThen(bool cond, const char* why) { return cond ? "" : why; }

}  // namespace dtrain::api
