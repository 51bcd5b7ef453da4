#pragma once
// The conformance suite: backend-agnostic checks run by every rank of a
// communicator, against closed-form expected results. LocalTest.cpp runs them over
// the local backend (ranks as threads), MpiTest.cpp over mpi (under mpirun).
#include <vector>

#include "comm/Communicator.h"

namespace dtrain::comm::testing {

// Rank r's value at index i: (r + 1) * (i % 13 + 1), so that sum, min, max and avg
// over n ranks have closed forms.
float contribution(int rank, size_t i);
float expected(ReduceOp op, int n, size_t i);

// Each returns normally or records gtest failures; all ranks must call it.
void allreduceCase(Communicator& c, Algorithm algo, size_t count, ReduceOp op, bool inPlace,
                   int groupSize = 0);
void allreduceSweep(Communicator& c, const std::vector<Algorithm>& algos,
                    const std::vector<size_t>& counts);
void allreduceInt(Communicator& c);
void broadcastAllRoots(Communicator& c, size_t count);
void reduceAllRoots(Communicator& c, size_t count);
void allgatherCase(Communicator& c, size_t count, bool inPlace);
void allgathervCase(Communicator& c);
void reduceScatterCase(Communicator& c, size_t count, ReduceOp op);
void alltoallCase(Communicator& c, size_t count);
void barrierCase(Communicator& c);
void asyncCase(Communicator& c);
void p2pRingCase(Communicator& c);
void splitCase(Communicator& c);
void mismatchCase(Communicator& c);       // every rank must see the error
void timeoutCase(Communicator& c);        // the last rank skips a collective
void p2pTimeoutCase(Communicator& c);

// The algorithms a backend offers for allreduce.
std::vector<Algorithm> algorithmsOf(const Communicator& c);

}  // namespace dtrain::comm::testing
