#pragma once
// Closed forms of the collectives' traffic and time (alpha-beta), and which
// link a group of ranks crosses: the cost model's communication terms.
//   ring allreduce of B bytes over n ranks: each rank sends 2(n-1)/n B in
//   2(n-1) steps; reduce-scatter and allgather: (n-1)/n B in n-1 steps.
// Ranks of one host share its link to the others: when k groups cross it at
// once, each gets 1/k of its bandwidth (pack vs spread placement).
#include <string>

#include "plan/Machine.h"

namespace dtrain::plan {

double ringAllreduceBytesPerRank(int n, double bytes);
double reduceScatterBytesPerRank(int n, double bytes);  // = allgather's
double ringAllreduceTime(int n, double bytes, const LinkCost& link);
double reduceScatterTime(int n, double bytes, const LinkCost& link);  // = allgather's
// Recursive halving and doubling (comm/algorithms/Rhd.cpp) with `perHost`
// consecutive ranks on each host; a tree (reduce, then broadcast).
double rhdAllreduceTime(int n, int perHost, double bytes, const LinkCost& intra, const LinkCost& inter);
double treeAllreduceTime(int n, double bytes, const LinkCost& link);
// Two-level, pipelined by blocks of kHierBlockBytes (comm/mpi/MpiHier.cpp):
// each block reduced in each host's shared memory (`shm`: the cost of moving
// data there), its slices rung between `hosts` by every local rank, copied out.
constexpr double kHierBlockBytes = 2 << 20;  // comm/mpi/NodeShm.h kBlockBytes
double hierarchicalAllreduceTime(int hosts, int perHost, double bytes, const LinkCost& shm,
                                 const LinkCost& inter);

// Where ranks run: `hosts` x `ranksPerHost` (rank r on host r / ranksPerHost,
// mpirun's by-core mapping); threads of one process under the local backend.
struct Placement {
  int hosts = 1, ranksPerHost = 1;
  bool threads = true;  // backend local
  int host(int rank) const { return rank / ranksPerHost; }
};

// A group of ranks that run one collective, and how many such groups run it
// at the same time through each host's link.
struct RankGroup {
  int size = 1;
  int hostsSpanned = 1;
  int perHost = 1;          // members on each host it spans
  int concurrentPerHost = 1;  // groups crossing one host's link at once
};

// The link a group's messages cross, its bandwidth shared by the groups
// crossing a host's link together.
LinkCost groupLink(const Machine& m, const Placement& p, const RankGroup& g);

// Allreduce of `bytes` over the group by `algo` (ring, hier, auto...): a
// calibrated fit of the machine file when it was measured at this shape,
// else the closed form.
double allreduceTime(const Machine& m, const Placement& p, const RankGroup& g, double bytes,
                     const std::string& algo);
// `bytes`: the whole vector (each rank holds or gets 1/n of it).
double allgatherTime(const Machine& m, const Placement& p, const RankGroup& g, double bytes);
double reduceScatterTime(const Machine& m, const Placement& p, const RankGroup& g, double bytes);
// One point-to-point message between ranks `a` and `b`.
double p2pTime(const Machine& m, const Placement& p, int a, int b, double bytes, int sharing);

}  // namespace dtrain::plan
