#include "parallel/MemoryGather.h"

namespace dtrain::parallel {

namespace {
constexpr int kMemoryTag = (1 << 20) + 16;  // far above any bucket index
constexpr size_t kFields = memory::kCategories + 2;
}  // namespace

std::vector<memory::RankMemory> allgatherMemory(comm::Communicator& comm,
                                                const memory::RankMemory& mine) {
  std::vector<int64_t> flat(mine.current.begin(), mine.current.end());
  flat.push_back(mine.activationsPeak);
  flat.push_back(mine.peak);
  std::vector<int64_t> all(kFields * static_cast<size_t>(comm.size()));
  comm::Options o;
  o.tag = kMemoryTag;
  comm.allgather(flat.data(), all.data(), kFields, DType::I64, o);
  std::vector<memory::RankMemory> out(static_cast<size_t>(comm.size()));
  for (size_t r = 0; r < out.size(); ++r) {
    const int64_t* src = all.data() + r * kFields;
    std::copy(src, src + memory::kCategories, out[r].current.begin());
    out[r].activationsPeak = src[memory::kCategories];
    out[r].peak = src[memory::kCategories + 1];
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
                   {"peak", m.peak}});
  return out;
}

}  // namespace dtrain::parallel
