#include "parallel/pipeline/Mesh.h"

#include "core/Error.h"

namespace dtrain::parallel::pipeline {

MeshCoord meshCoord(int rank, int dp, int pp, bool spread) {
  return spread ? MeshCoord{rank % dp, rank / dp} : MeshCoord{rank / pp, rank % pp};
}

int meshRank(MeshCoord c, int dp, int pp, bool spread) {
  return spread ? c.stage * dp + c.replica : c.replica * pp + c.stage;
}

Mesh::Mesh(comm::Communicator& world, int pp, bool spread) : dp_(world.size() / pp), pp_(pp), spread_(spread) {
  DTRAIN_CHECK_USAGE(pp >= 1 && world.size() % pp == 0, world.size(),
                     " ranks are not a multiple of ", pp, " pipeline stages");
  coord_ = meshCoord(world.rank(), dp_, pp_, spread_);
  // Both splits are collective over the world, in the same order on every rank.
  pipeline_ = world.split(coord_.replica, coord_.stage);
  auto replicas = world.split(coord_.stage, coord_.replica);
  if (dp_ > 1) replicas_ = std::move(replicas);
}

std::string Mesh::describe(int rank) const {
  return detail::concat("dp ", dp_, " x pp ", pp_, ", ", spread_ ? "spread" : "pack", ": rank ",
                        rank, " = replica ", coord_.replica, ", stage ", coord_.stage);
}

}  // namespace dtrain::parallel::pipeline
