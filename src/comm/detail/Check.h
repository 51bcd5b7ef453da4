#pragma once
// Helpers shared by the backends' call checks and error messages.
#include <string>
#include <vector>

#include "comm/Communicator.h"

namespace dtrain::comm::detail {

// "1, 3, 4"
std::string rankList(const std::vector<int>& ranks);

// Throws dtrain::Error listing every rank's call when descs (indexed by rank) differ.
void compareCalls(const Call& call, int rank, const std::vector<CallDesc>& descs);

// Throws TimeoutError: "<call> timed out after T ms waiting for ranks 2, 3 to join".
[[noreturn]] void throwNotArrived(const Call& call, int rank, const std::vector<int>& missing);

// Milliseconds left until the call's deadline (at least 1).
Millis remaining(const Call& call);

}  // namespace dtrain::comm::detail
