#include "plan/Collectives.h"

#include <algorithm>
#include <cmath>

#include "comm/Communicator.h"

namespace dtrain::plan {

double ringAllreduceBytesPerRank(int n, double bytes) { return n <= 1 ? 0 : 2.0 * (n - 1) / n * bytes; }
double reduceScatterBytesPerRank(int n, double bytes) { return n <= 1 ? 0 : 1.0 * (n - 1) / n * bytes; }

double ringAllreduceTime(int n, double bytes, const LinkCost& link) {
  if (n <= 1) return 0;
  return 2.0 * (n - 1) * link.alphaS + ringAllreduceBytesPerRank(n, bytes) / link.bytesPerS;
}

double reduceScatterTime(int n, double bytes, const LinkCost& link) {
  if (n <= 1) return 0;
  return (n - 1) * link.alphaS + reduceScatterBytesPerRank(n, bytes) / link.bytesPerS;
}

double rhdAllreduceTime(int n, int perHost, double bytes, const LinkCost& intra, const LinkCost& inter) {
  // comm/algorithms/Rhd.cpp halves from distance n/2 down: while the distance is
  // at least the ranks per host (mpirun's by-core mapping), every rank of a host
  // sends across at once, so the host's link carries perHost halves.
  double t = 0, part = bytes / 2;
  for (int d = n / 2; d >= 1; d /= 2, part /= 2) {
    const bool across = d >= perHost;
    const LinkCost& l = across ? inter : intra;
    t += 2 * (l.alphaS + (across ? perHost : 1) * part / l.bytesPerS);  // halving, then doubling
  }
  return t;
}

double treeAllreduceTime(int n, double bytes, const LinkCost& link) {
  int levels = 0;
  while ((1 << levels) < n) ++levels;
  return 2.0 * levels * link.time(bytes);  // reduce up, broadcast down, the whole message per level
}

double hierarchicalAllreduceTime(int hosts, int perHost, double bytes, const LinkCost& shm,
                                 const LinkCost& inter) {
  // comm/mpi/MpiHier.cpp, block by block: a block is staged, reduced and
  // copied out in the host's shared memory (a reduce-scatter's and an
  // allgather's traffic), while the previous block's slices ring between hosts
  // (each local rank rings its slice, together the whole block over the
  // host's link). A two-stage pipeline: the slower stage per block, plus one
  // block of the other to fill and drain it.
  const double block = std::min(bytes, kHierBlockBytes);
  const double blocks = std::ceil(bytes / kHierBlockBytes);
  const double local = perHost > 1 ? 2 * reduceScatterTime(perHost, block, shm) : 0;
  const double cross = ringAllreduceTime(hosts, block, inter);
  return blocks * std::max(local, cross) + std::min(local, cross);
}

namespace {

// A calibrated fit measured at this group's shape: across hosts, one rank per
// host alone on its link ("inter_host"), or several per host sharing it
// ("inter_host_shared", the groups of a host running together as measured).
const CollectiveFit* calibratedFit(const Machine& m, LinkKind kind, const RankGroup& g, const std::string& algo) {
  // Other groups on the same links at once were not part of the measurement.
  if (g.concurrentPerHost != 1) return nullptr;
  auto matches = [&g](const CollectiveFit* f) { return f && f->ranks == g.size && f->ranksPerHost == g.perHost; };
  if (const CollectiveFit* f = m.collective(kind, algo); matches(f)) return f;
  if (kind == LinkKind::InterHost)
    if (const CollectiveFit* f = m.collective(LinkKind::InterHostShared, algo); matches(f)) return f;
  return nullptr;
}

}  // namespace

LinkCost groupLink(const Machine& m, const Placement& p, const RankGroup& g) {
  if (g.hostsSpanned <= 1) return m.link(p.threads ? LinkKind::SameProcess : LinkKind::IntraHost);
  LinkCost l = m.link(LinkKind::InterHost);
  l.bytesPerS /= std::max(1, g.concurrentPerHost);
  return l;
}

double allreduceTime(const Machine& m, const Placement& p, const RankGroup& g, double bytes,
                     const std::string& algo) {
  if (g.size <= 1) return 0;
  const LinkKind kind = g.hostsSpanned > 1 ? LinkKind::InterHost
                        : p.threads        ? LinkKind::SameProcess
                                           : LinkKind::IntraHost;
  // The trainer's auto: across hosts comm::Communicator::autoAllreduce (the
  // hierarchical one for large messages with several ranks a host); within a
  // host it moves the data through shared memory, for which the ring's fit stands.
  std::string a = algo;
  if (a == "auto")
    a = g.hostsSpanned > 1 ? comm::algorithmName(comm::Communicator::autoAllreduce(static_cast<size_t>(bytes), g.size,
                                                                                   g.perHost))
                           : "ring";
  const bool hier = a == "hier";
  // The fit of the algorithm the trainer runs (algorithms differ by more than
  // their byte counts say on shared, bursty links, so one's fit cannot stand
  // for another's). One
  // calibrate does not measure (shm, MPI's native; tree and recursive halving in
  // machine files written before it did) takes the ring's; without either, the
  // closed form.
  const CollectiveFit* f = calibratedFit(m, kind, g, "allreduce_" + a);
  if (!f && !hier) f = calibratedFit(m, kind, g, "allreduce_ring");
  if (f) return f->time(bytes);
  if (hier && g.hostsSpanned > 1) {
    LinkCost inter = m.link(LinkKind::InterHost);
    // One leader per group and host: the groups on a host still share its link.
    inter.bytesPerS /= std::max(1, g.concurrentPerHost);
    // Inside a host it moves data through shared memory as threads of one process
    // do (on emulated hosts the intra-host link is TCP over loopback).
    return hierarchicalAllreduceTime(g.hostsSpanned, g.perHost, bytes, m.link(LinkKind::SameProcess), inter);
  }
  if (a == "rhd" && g.hostsSpanned > 1) {
    LinkCost inter = m.link(LinkKind::InterHost);
    inter.bytesPerS /= std::max(1, g.concurrentPerHost);
    return rhdAllreduceTime(g.size, g.perHost, bytes, m.link(p.threads ? LinkKind::SameProcess : LinkKind::IntraHost),
                            inter);
  }
  if (a == "tree") return treeAllreduceTime(g.size, bytes, groupLink(m, p, g));
  return ringAllreduceTime(g.size, bytes, groupLink(m, p, g));
}

namespace {

// A ring collective that moves (n - 1) / n of the bytes: its calibrated fit
// where the machine file has one at this shape, else the closed form.
double ringHalfTime(const Machine& m, const Placement& p, const RankGroup& g, double bytes, const char* fit) {
  if (g.size <= 1) return 0;
  const LinkKind kind = g.hostsSpanned > 1 ? LinkKind::InterHost
                        : p.threads        ? LinkKind::SameProcess
                                           : LinkKind::IntraHost;
  if (const CollectiveFit* f = calibratedFit(m, kind, g, fit)) return f->time(bytes);
  return reduceScatterTime(g.size, bytes, groupLink(m, p, g));
}

}  // namespace

double allgatherTime(const Machine& m, const Placement& p, const RankGroup& g, double bytes) {
  return ringHalfTime(m, p, g, bytes, "allgather_ring");
}

double reduceScatterTime(const Machine& m, const Placement& p, const RankGroup& g, double bytes) {
  return ringHalfTime(m, p, g, bytes, "reduce_scatter_ring");
}

double p2pTime(const Machine& m, const Placement& p, int a, int b, double bytes, int sharing) {
  if (p.host(a) != p.host(b)) {
    LinkCost l = m.link(LinkKind::InterHost);
    l.bytesPerS /= std::max(1, sharing);
    return l.time(bytes);
  }
  return m.link(p.threads ? LinkKind::SameProcess : LinkKind::IntraHost).time(bytes);
}

}  // namespace dtrain::plan
