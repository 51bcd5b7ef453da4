#include "parallel/RankState.h"

#include <cstring>

namespace dtrain::parallel {

std::map<std::string, Tensor> gatherRankState(comm::Communicator& comm, const NamedState& mine, int tag) {
  std::vector<uint8_t> flat;
  for (auto& [name, t] : mine) {
    const Tensor c = t->contiguous();
    const auto* b = static_cast<const uint8_t*>(c.rawData());
    flat.insert(flat.end(), b, b + c.nbytes());
  }
  std::vector<uint8_t> all(flat.size() * static_cast<size_t>(comm.size()));
  comm::Options o;
  o.tag = tag;
  if (!flat.empty()) comm.allgather(flat.data(), all.data(), flat.size(), DType::U8, o);
  std::map<std::string, Tensor> out;
  if (comm.rank() != 0) return out;
  for (int r = 0; r < comm.size(); ++r) {
    const uint8_t* src = all.data() + flat.size() * static_cast<size_t>(r);
    for (auto& [name, t] : mine) {
      Tensor copy = Tensor::empty(t->shape(), t->dtype());
      std::memcpy(copy.rawData(), src, copy.nbytes());
      src += copy.nbytes();
      out.emplace("rank" + std::to_string(r) + "." + name, std::move(copy));
    }
  }
  return out;
}

}  // namespace dtrain::parallel
