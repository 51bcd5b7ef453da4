#pragma once
// What a hung run's ranks were doing, in one or two lines: the call most of
// them wait in, who never entered it and what those ranks last did:
//   rank 3 (host h1) never entered allreduce #1042 of step 311 (last: backward
//   of step 311, 14.2 s ago); ranks 0-2 wait in it
// From every rank's FlightState (FlightRecorder.h): in-process for the local
// backend, from the heartbeats for mpi (each beat carries its sender's state).
#include <string>
#include <vector>

#include "comm/FlightRecorder.h"

namespace dtrain::comm {

// `ranks[r]` is rank r's state (known == 0 where nothing was heard of it).
// Empty when no rank waits in a recorded call (nothing to name).
std::string diagnoseHang(const std::vector<FlightState>& ranks);

// "allreduce #1042 of step 311", "recv from rank 0 (tag 5) of step 3".
std::string describeCall(const FlightCall& call);
// "0-2, 4, 6-7"
std::string rankRanges(const std::vector<int>& ranks);


}  // namespace dtrain::comm
