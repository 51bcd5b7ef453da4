#pragma once
// The device mesh of a parallel plan: world = dp x pp ranks (tp, innermost,
// comes later), and each rank's communicators along each dimension, made by
// Communicator::split:
//   pack    (default) rank = replica * pp + stage: a pipeline's stages are
//           neighbouring ranks (the same host under mpirun's by-core mapping),
//           its activations cross the fastest links.
//   spread  rank = stage * dp + replica: a stage's replicas are neighbours,
//           the gradient allreduce crosses the fastest links instead.
#include <memory>
#include <string>

#include "comm/Communicator.h"

namespace dtrain::parallel::pipeline {

struct MeshCoord {
  int replica = 0;  // data-parallel index, 0..dp-1
  int stage = 0;    // pipeline stage, 0..pp-1
};

// World rank <-> coordinates for `dp` x `pp` ranks.
MeshCoord meshCoord(int rank, int dp, int pp, bool spread);
int meshRank(MeshCoord c, int dp, int pp, bool spread);

class Mesh {
 public:
  // Collective over `world` (every rank calls it); world.size() must be a multiple of pp.
  Mesh(comm::Communicator& world, int pp, bool spread);
  int dp() const { return dp_; }
  int pp() const { return pp_; }
  MeshCoord coord() const { return coord_; }
  // The ranks of this rank's pipeline (rank in it = stage), and of its stage's
  // replicas (rank in it = replica; null when dp = 1).
  comm::Communicator& pipeline() { return *pipeline_; }
  comm::Communicator* replicas() { return replicas_.get(); }
  // "dp 2 x pp 2, pack: rank 3 = replica 1, stage 1"
  std::string describe(int rank) const;

 private:
  int dp_, pp_;
  bool spread_;
  MeshCoord coord_;
  std::unique_ptr<comm::Communicator> pipeline_, replicas_;
};

}  // namespace dtrain::parallel::pipeline
