#pragma once
// Exact sums of per-rank doubles: there is no f64 reduction, so the values are
// gathered bit for bit and added in rank order, the same total on every rank
// (a gradient norm every rank clips by must be the same everywhere).
#include <vector>

#include "comm/Communicator.h"

namespace dtrain::parallel {

// Collective over `comm`: every rank's doubles, in rank order, on every rank.
std::vector<double> allgatherDoubles(comm::Communicator& comm, const std::vector<double>& mine,
                                     int tag = 0);

// Collective over `comm`: the sum of every rank's value, the same on every rank.
double sumOverRanks(comm::Communicator& comm, double value, int tag = 0);
// The same element by element: values[i] becomes the sum over ranks of their
// values[i], added in rank order from 0 (every rank passes as many).
void sumOverRanks(comm::Communicator& comm, std::vector<double>& values, int tag = 0);

}  // namespace dtrain::parallel
