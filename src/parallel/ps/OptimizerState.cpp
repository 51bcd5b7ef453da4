#include "parallel/ps/OptimizerState.h"

#include "core/Error.h"

namespace dtrain::parallel::ps {

std::vector<ParamState> paramStates(optim::Optimizer& opt) {
  opt.ensureState();
  auto named = opt.namedState();
  const size_t k = opt.slotNames().size();
  DTRAIN_CHECK(named.size() == opt.size() * (1 + k), "optimizer state layout: ", named.size(),
               " entries for ", opt.size(), " parameters with ", k, " slots");
  std::vector<ParamState> out(opt.size());
  for (size_t i = 0; i < opt.size(); ++i) {
    out[i].step = named[i * (1 + k)].second;
    for (size_t j = 0; j < k; ++j) out[i].slots.push_back(named[i * (1 + k) + 1 + j].second);
  }
  return out;
}

}  // namespace dtrain::parallel::ps
