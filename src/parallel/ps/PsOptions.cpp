#include "parallel/ps/PsOptions.h"

#include "core/Error.h"

namespace dtrain::parallel::ps {

Consistency consistencyFromName(const std::string& name) {
  if (name == "sync") return Consistency::Sync;
  if (name == "async") return Consistency::Async;
  if (name == "ssp") return Consistency::Ssp;
  throw UsageError("unknown --consistency '" + name + "' (known: sync, async, ssp)");
}

const char* consistencyName(Consistency c) {
  switch (c) {
    case Consistency::Sync: return "sync";
    case Consistency::Async: return "async";
    case Consistency::Ssp: return "ssp";
  }
  return "?";
}

}  // namespace dtrain::parallel::ps
