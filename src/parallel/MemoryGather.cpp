#include "parallel/MemoryGather.h"

#include <algorithm>

namespace dtrain::parallel {

namespace {
constexpr int kMemoryTag = (1 << 20) + 16;  // far above any bucket index
}  // namespace

std::vector<memory::RankMemory> allgatherMemory(comm::Communicator& comm,
                                                const memory::RankMemory& mine) {
  constexpr size_t kFields = memory::RankMemory::kFields;
  const auto flat = mine.toArray();
  std::vector<int64_t> all(kFields * static_cast<size_t>(comm.size()));
  comm::Options o;
  o.tag = kMemoryTag;
  comm.allgather(flat.data(), all.data(), kFields, DType::I64, o);
  std::vector<memory::RankMemory> out;
  for (int r = 0; r < comm.size(); ++r) {
    std::array<int64_t, kFields> a;
    std::copy_n(all.data() + r * kFields, kFields, a.begin());
    out.push_back(memory::RankMemory::fromArray(a));
  }
  return out;
}

nlohmann::json memoryPerRankJson(const std::vector<memory::RankMemory>& ranks) {
  using memory::Category;
  auto at = [](const memory::RankMemory& m, Category c) { return m.current[static_cast<int>(c)]; };
  nlohmann::json out = nlohmann::json::array();
  for (const auto& m : ranks)
    out.push_back({{"parameters", at(m, Category::Parameters)},
                   {"gradients", at(m, Category::Gradients)},
                   {"optimizer_state", at(m, Category::OptimizerState)},
                   {"activations_peak", m.activationsPeak},
                   {"peak", m.peak},
                   {"offloaded", m.offloaded}});
  return out;
}

}  // namespace dtrain::parallel
