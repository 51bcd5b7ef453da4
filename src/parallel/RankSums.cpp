#include "parallel/RankSums.h"

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
  double sum = 0;
  for (double v : allgatherDoubles(comm, {value}, tag)) sum += v;
  return sum;
}

}  // namespace dtrain::parallel
