#include "runtime/StreamingData.h"

#include <map>

namespace dtrain::runtime {
namespace {

const std::map<std::string, StreamingDataset>& registry() {
  static const std::map<std::string, StreamingDataset> kKinds{{"shards", shardsDataset()},
                                                                      {"imagefolder", imageFolderDataset()},
                                                                      {"tokens", tokensDataset()}};
  return kKinds;
}

}  // namespace

const StreamingDataset* streamingDataset(const std::string& name) {
  auto it = registry().find(name);
  return it == registry().end() ? nullptr : &it->second;
}

std::vector<std::string> streamingDatasetNames() {
  std::vector<std::string> names;
  for (const auto& [name, kind] : registry()) names.push_back(name);
  return names;
}

}  // namespace dtrain::runtime
