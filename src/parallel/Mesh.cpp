#include "parallel/Mesh.h"

#include "core/Error.h"

namespace dtrain::parallel {

MeshCoord meshCoord(int rank, MeshShape s, bool spread) {
  if (spread) return {rank % s.dp, rank / s.dp % s.pp, rank / (s.dp * s.pp)};
  return {rank / (s.pp * s.tp), rank / s.tp % s.pp, rank % s.tp};
}

int meshRank(MeshCoord c, MeshShape s, bool spread) {
  return spread ? (c.slice * s.pp + c.stage) * s.dp + c.replica
                : (c.replica * s.pp + c.stage) * s.tp + c.slice;
}

Mesh::Mesh(comm::Communicator& world, int pp, int tp, bool spread) : spread_(spread) {
  DTRAIN_CHECK_USAGE(pp >= 1 && tp >= 1 && world.size() % (pp * tp) == 0, world.size(),
                     " ranks are not a multiple of ", pp, " pipeline stages x ", tp,
                     " tensor-parallel ranks");
  shape_ = {world.size() / (pp * tp), pp, tp};
  coord_ = meshCoord(world.rank(), shape_, spread_);
  const MeshCoord c = coord_;
  // Every split is collective over the world, in the same order on every rank.
  pipeline_ = world.split(c.replica * tp + c.slice, c.stage);
  auto tensor = world.split(c.replica * pp + c.stage, c.slice);
  auto replicas = world.split(c.stage * tp + c.slice, c.replica);
  if (tp > 1) tensor_ = std::move(tensor);
  if (shape_.dp > 1) replicas_ = std::move(replicas);
}

std::string Mesh::describe(int rank) const {
  return detail::concat("dp ", shape_.dp, " x pp ", shape_.pp, " x tp ", shape_.tp, ", ",
                        spread_ ? "spread" : "pack", ": rank ", rank, " = replica ", coord_.replica,
                        ", stage ", coord_.stage, ", slice ", coord_.slice);
}

}  // namespace dtrain::parallel
