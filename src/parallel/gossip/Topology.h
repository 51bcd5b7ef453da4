#pragma once
// The graphs gossip averages over. Each is a Cayley graph of the ranks (a
// ring, a 2-D torus, the exponential graph of Assran et al.'s SGP with edges
// i +- 2^k, the complete graph), so every rank has the same degree and the
// uniform weights 1 / (degree + 1) make a symmetric, doubly stochastic mixing
// matrix: the ranks' mean is kept by every round (D-PSGD's assumption).
#include <string>
#include <vector>

namespace dtrain::parallel::gossip {

std::vector<std::string> topologyNames();
// `rank`'s neighbours among `size` ranks, ascending, without itself. Throws
// UsageError on an unknown name.
std::vector<int> neighbours(const std::string& topology, int rank, int size);
// The torus's rows x columns for `size` ranks: the most square factorisation.
std::pair<int, int> torusShape(int size);

}  // namespace dtrain::parallel::gossip
