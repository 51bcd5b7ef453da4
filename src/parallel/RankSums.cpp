#include "parallel/RankSums.h"

#include <algorithm>

namespace dtrain::parallel {

std::vector<double> allgatherDoubles(comm::Communicator& comm, const std::vector<double>& mine,
                                     int tag) {
  std::vector<double> all(mine.size() * comm.size());
  comm::Options o;
  o.tag = tag;
  comm.allgather(mine.data(), all.data(), mine.size() * sizeof(double), DType::U8, o);
  return all;
}

double sumOverRanks(comm::Communicator& comm, double value, int tag) {
  std::vector<double> v{value};
  sumOverRanks(comm, v, tag);
  return v[0];
}

void sumOverRanks(comm::Communicator& comm, std::vector<double>& values, int tag) {
  const std::vector<double> all = allgatherDoubles(comm, values, tag);
  std::fill(values.begin(), values.end(), 0.0);
  for (size_t k = 0; k < all.size(); ++k) values[k % values.size()] += all[k];
}

}  // namespace dtrain::parallel
