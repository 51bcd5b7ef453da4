#pragma once
// Lookup and help text of the name -> entry registries of this folder (aggregators,
// attacks): an unknown name is a UsageError that lists the known ones.
#include <map>
#include <string>

#include "core/Error.h"

namespace dtrain::federated {

template <typename Entry>
const Entry& lookupByName(const std::map<std::string, Entry>& registry, const std::string& name,
                          const char* flag) {
  auto it = registry.find(name);
  if (it != registry.end()) return it->second;
  std::string known;
  for (const auto& [n, e] : registry) known += (known.empty() ? "" : ", ") + n;
  throw UsageError(std::string("unknown ") + flag + " '" + name + "' (known: " + known + ")");
}

// "name: description; name: description" (flag help).
template <typename Entry>
std::string describeByName(const std::map<std::string, Entry>& registry) {
  std::string s;
  for (const auto& [n, e] : registry) s += (s.empty() ? "" : "; ") + n + ": " + e.description;
  return s;
}

}  // namespace dtrain::federated
