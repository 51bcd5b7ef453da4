#include "parallel/gossip/Topology.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "core/Error.h"

namespace dtrain::parallel::gossip {

namespace {

int wrap(int i, int n) { return ((i % n) + n) % n; }

std::set<int> ring(int r, int n) { return {wrap(r - 1, n), wrap(r + 1, n)}; }

std::set<int> torus(int r, int n) {
  const auto [rows, cols] = torusShape(n);
  const int row = r / cols, col = r % cols;
  return {wrap(row - 1, rows) * cols + col, wrap(row + 1, rows) * cols + col, row * cols + wrap(col - 1, cols),
          row * cols + wrap(col + 1, cols)};
}

std::set<int> exponential(int r, int n) {
  std::set<int> out;
  for (int hop = 1; hop < n; hop *= 2) out.insert({wrap(r + hop, n), wrap(r - hop, n)});
  return out;
}

std::set<int> complete(int, int n) {
  std::set<int> out;
  for (int i = 0; i < n; ++i) out.insert(i);
  return out;
}

const std::map<std::string, std::function<std::set<int>(int, int)>>& graphs() {
  static const std::map<std::string, std::function<std::set<int>(int, int)>> g{
      {"ring", ring}, {"torus", torus}, {"exponential", exponential}, {"complete", complete}};
  return g;
}

}  // namespace

std::vector<std::string> topologyNames() {
  std::vector<std::string> names;
  for (const auto& [name, f] : graphs()) names.push_back(name);
  return names;
}

std::pair<int, int> torusShape(int size) {
  int rows = 1;
  for (int d = 1; d * d <= size; ++d)
    if (size % d == 0) rows = d;
  return {rows, size / rows};
}

std::vector<int> neighbours(const std::string& topology, int rank, int size) {
  auto it = graphs().find(topology);
  DTRAIN_CHECK_USAGE(it != graphs().end(), "unknown --topology '", topology, "'");
  std::set<int> s = it->second(rank, size);
  s.erase(rank);
  return {s.begin(), s.end()};
}

}  // namespace dtrain::parallel::gossip
