#pragma once
// Entry points of the local backend (ranks as threads of this process).
#include <functional>
#include <memory>

#include "comm/Communicator.h"

namespace dtrain::comm::local {

// Shared state of `size` ranks, to pass as BackendConfig::group.
std::shared_ptr<void> makeGroup(int size);

// Runs fn on worldSize threads, each with its own rank's communicator. When a rank
// throws, the others are woken and fail promptly (instead of waiting for their
// timeouts); runLocal then rethrows the first rank's original exception.
// timeout 0 = defaultTimeout().
void runLocal(int worldSize, const std::function<void(Communicator&)>& fn,
              Millis timeout = Millis{0});

}  // namespace dtrain::comm::local
