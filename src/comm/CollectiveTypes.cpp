#include "comm/CollectiveTypes.h"

#include "core/Error.h"
#include "core/NameRegistry.h"

namespace dtrain::comm {

const char* reduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Min: return "min";
    case ReduceOp::Max: return "max";
  }
  return "?";
}

const char* algorithmName(Algorithm algo) {
  switch (algo) {
    case Algorithm::Auto: return "auto";
    case Algorithm::Ring: return "ring";
    case Algorithm::Rhd: return "rhd";
    case Algorithm::Tree: return "tree";
    case Algorithm::Hier: return "hier";
    case Algorithm::Shm: return "shm";
    case Algorithm::Native: return "native";
  }
  return "?";
}

Algorithm algorithmFromName(const std::string& name) {
  static const NameRegistry<Algorithm> algorithms = [] {
    std::vector<std::pair<std::string, Algorithm>> entries;
    for (auto a : {Algorithm::Auto, Algorithm::Ring, Algorithm::Rhd, Algorithm::Tree,
                   Algorithm::Hier, Algorithm::Shm, Algorithm::Native})
      entries.emplace_back(algorithmName(a), a);
    return NameRegistry<Algorithm>("allreduce algorithm", std::move(entries));
  }();
  return algorithms.find(name);
}

const char* opKindName(OpKind kind) {
  switch (kind) {
    case OpKind::Allreduce: return "allreduce";
    case OpKind::Broadcast: return "broadcast";
    case OpKind::Reduce: return "reduce";
    case OpKind::Allgather: return "allgather";
    case OpKind::Allgatherv: return "allgatherv";
    case OpKind::ReduceScatter: return "reduceScatter";
    case OpKind::Alltoall: return "alltoall";
    case OpKind::Barrier: return "barrier";
    case OpKind::Split: return "split";
  }
  return "?";
}

std::string CallDesc::str() const {
  std::string s = std::string(opKindName(kind)) + "(";
  switch (kind) {
    case OpKind::Barrier: s += "tag=" + std::to_string(tag); break;
    case OpKind::Split: s += "tag=" + std::to_string(tag); break;
    default:
      s += "count=" + std::to_string(count) + ", dtype=" + dtypeName(dtype);
      if (kind == OpKind::Allreduce || kind == OpKind::Reduce || kind == OpKind::ReduceScatter)
        s += std::string(", op=") + reduceOpName(op);
      if (kind == OpKind::Allreduce) {
        s += std::string(", algo=") + algorithmName(algo);
        if (algo == Algorithm::Hier) s += ", groupSize=" + std::to_string(groupSize);
      }
      if (kind == OpKind::Broadcast || kind == OpKind::Reduce) s += ", root=" + std::to_string(root);
      s += ", tag=" + std::to_string(tag);
  }
  return s + ")";
}

}  // namespace dtrain::comm
