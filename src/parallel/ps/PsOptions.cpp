#include "parallel/ps/PsOptions.h"

#include "core/Error.h"
#include "core/NameRegistry.h"

namespace dtrain::parallel::ps {

Consistency consistencyFromName(const std::string& name) {
  static const NameRegistry<Consistency> kinds(
      "--consistency",
      {{"sync", Consistency::Sync}, {"async", Consistency::Async}, {"ssp", Consistency::Ssp}});
  return kinds.find(name);
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
