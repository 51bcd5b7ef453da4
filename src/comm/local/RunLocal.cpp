#include <exception>
#include <thread>
#include <vector>

#include "comm/BackendRegistry.h"
#include "comm/local/Local.h"
#include "comm/local/LocalCommunicator.h"
#include "core/Error.h"

namespace dtrain::comm::local {

std::shared_ptr<void> makeGroup(int size) {
  DTRAIN_CHECK_USAGE(size >= 1, "local backend: world size must be >= 1 (got ", size, ")");
  return std::make_shared<World>(size);
}

void runLocal(int worldSize, const std::function<void(Communicator&)>& fn, Millis timeout) {
  DTRAIN_CHECK_USAGE(worldSize >= 1, "local backend: world size must be >= 1 (got ", worldSize, ")");
  if (timeout.count() <= 0) timeout = defaultTimeout();
  auto world = std::make_shared<World>(worldSize);
  std::vector<std::exception_ptr> errors(worldSize);
  auto body = [&](int r) {
    try {
      LocalCommunicator comm(world, r, timeout);
      fn(comm);
    } catch (const std::exception& e) {
      errors[r] = std::current_exception();
      world->abort(r, e.what());
    } catch (...) {
      errors[r] = std::current_exception();
      world->abort(r, "unknown exception");
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(worldSize - 1);
  for (int r = 1; r < worldSize; ++r) threads.emplace_back(body, r);
  body(0);
  for (auto& t : threads) t.join();
  if (world->aborted()) std::rethrow_exception(errors[world->failedRank()]);
}

}  // namespace dtrain::comm::local
