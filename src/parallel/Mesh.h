#pragma once
// The device mesh of a parallel plan: world = dp x pp x tp ranks, and each
// rank's communicators along each dimension, made by Communicator::split.
//   pack    (default) rank = (replica * pp + stage) * tp + slice: a
//           tensor-parallel group on neighbouring ranks, then a pipeline's
//           stages (the same host under mpirun's by-core mapping), so the
//           largest, most frequent messages cross the fastest links.
//   spread  the reverse, rank = (slice * pp + stage) * dp + replica: a
//           stage's (slice's) replicas are neighbours, the gradient allreduce
//           crosses the fastest links instead.
#include <memory>
#include <string>

#include "comm/Communicator.h"

namespace dtrain::parallel {

struct MeshCoord {
  int replica = 0;  // data-parallel index, 0..dp-1
  int stage = 0;    // pipeline stage, 0..pp-1
  int slice = 0;    // tensor-parallel index, 0..tp-1
};

struct MeshShape {
  int dp = 1, pp = 1, tp = 1;
};

// World rank <-> coordinates.
MeshCoord meshCoord(int rank, MeshShape shape, bool spread);
int meshRank(MeshCoord c, MeshShape shape, bool spread);

class Mesh {
 public:
  // Collective over `world` (every rank calls it); world.size() must be a
  // multiple of pp x tp (dp is the rest).
  Mesh(comm::Communicator& world, int pp, int tp, bool spread);
  int dp() const { return shape_.dp; }
  int pp() const { return shape_.pp; }
  int tp() const { return shape_.tp; }
  MeshCoord coord() const { return coord_; }
  // The ranks of this rank's pipeline (same replica and slice; rank in it =
  // stage), of its tensor-parallel group (same replica and stage; rank in it =
  // slice; null when tp = 1), and of its replicas (same stage and slice; rank
  // in it = replica; null when dp = 1).
  comm::Communicator& pipeline() { return *pipeline_; }
  comm::Communicator* tensorGroup() { return tensor_.get(); }
  comm::Communicator* replicas() { return replicas_.get(); }
  // "dp 2 x pp 2 x tp 1, pack: rank 3 = replica 1, stage 1, slice 0"
  std::string describe(int rank) const;

 private:
  MeshShape shape_;
  bool spread_;
  MeshCoord coord_;
  std::unique_ptr<comm::Communicator> pipeline_, tensor_, replicas_;
};

}  // namespace dtrain::parallel
