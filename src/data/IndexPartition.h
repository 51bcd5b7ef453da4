#pragma once
// Splitting a dataset's indices [0, n) across K parts (federated clients, parameter-server
// workers with private data, ...). Every index lands in exactly one part.
#include <cstdint>
#include <span>
#include <vector>

namespace dtrain::data {

using Parts = std::vector<std::vector<int64_t>>;

// IID: a seeded permutation of [0, n) cut into K contiguous shards whose sizes differ
// by at most one.
Parts partitionIid(int64_t n, int parts, uint64_t seed);

// Non-IID "shards" scheme of FedAvg (McMahan et al. 2017): indices sorted by label are
// cut into parts * shardsPerPart equal shards, and each part receives shardsPerPart
// randomly chosen shards, so it sees samples of only about shardsPerPart classes.
Parts partitionByLabel(std::span<const int32_t> labels, int parts, int shardsPerPart,
                       uint64_t seed);

// Label skew (Hsu et al. 2019): for every class, the class's samples are split across
// the parts in proportions drawn from Dirichlet(alpha, ..., alpha). Small alpha: each
// part holds few classes; large alpha: close to IID. Parts may come out empty for small
// alpha and many parts; callers that need samples in every part check.
Parts partitionDirichlet(std::span<const int32_t> labels, int parts, double alpha, uint64_t seed);

// Quantity skew: an IID shuffle cut into parts whose sizes follow a log-normal
// distribution of standard deviation sigma (sigma 0: equal sizes), each part at least
// one sample.
Parts partitionQuantitySkew(int64_t n, int parts, double sigma, uint64_t seed);

}  // namespace dtrain::data
