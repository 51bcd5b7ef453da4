// The parameter-server messages (parallel/ps/Protocol.h) as their receivers
// read them: byte 0 picks the channel (a server's Init, Push and control
// receives; a worker's parameter reply and final message), then a Header's
// bytes (zero-padded), then the payload. A header decodeHeader accepts must
// leave every sum the receivers do with its counters in range (done here the
// same way, under UBSan) and every size it announces within what it may
// allocate; the final message goes on as PsWorker::receiveFinal reads it:
// (1 + slots) shards of parameters and state, then `extra` bytes of
// statistics JSON for 3 workers.
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz/FuzzInput.h"
#include "parallel/ps/Protocol.h"
#include "parallel/ps/ServerStats.h"

namespace {

using namespace dtrain::parallel::ps;

// The receivers' bookkeeping with a header's counters (Server.cpp, Worker.cpp).
void receiverSums(const Header& h) {
  const int64_t version = kMaxCount, staleness = 1000;  // the largest a run has
  volatile int64_t sink = 0;
  sink = h.step + 1;                                                  // p.clock
  sink = version - h.version;                                         // staleness of a push
  sink = h.step - std::numeric_limits<int64_t>::max();                // ssp ahead, no live worker
  sink = h.step - staleness;                                          // ssp pull
  sink = (h.step + 1) - h.minClock;                                   // worker: read staleness
  sink = h.seq + 1;
  (void)sink;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int channel = data[0] % 5;
  std::vector<float> head(kHeaderFloats, 0.0f);
  const size_t headBytes = std::min(size - 1, sizeof(Header));
  std::memcpy(head.data(), data + 1, headBytes);
  const uint8_t* rest = data + 1 + headBytes;
  const size_t restBytes = size - 1 - headBytes;
  dtrain::fuzz::expectErrorsOnly([&] {
    switch (channel) {
      case 0: {  // server: worker 0's parameters, then its optimizer state (slots x shard)
        const Header h = decodeHeader(head.data(), {Kind::Init}, "worker 0 (rank 2)");
        receiverSums(h);
        if (h.slots == 0) return;  // as Server::receiveInit: no state follows
        std::vector<float> state(static_cast<size_t>(h.slots) * 4);
        std::memcpy(state.data(), rest, std::min(restBytes, state.size() * sizeof(float)));
        return;
      }
      case 1:  // server: a push
        return receiverSums(decodeHeader(head.data(), {Kind::Push}, "worker 1 (rank 3)"));
      case 2: {  // server: a pull or the end of a worker's run
        const Header h = decodeHeader(head.data(), {Kind::Pull, Kind::Done}, "worker 1 (rank 3)");
        receiverSums(h);
        if (h.kind == Kind::Done) {
          volatile int64_t peak = dtrain::memory::RankMemory::fromArray(h.memory).peak;
          (void)peak;
        }
        return;
      }
      case 3:  // worker: the parameters
        return receiverSums(decodeHeader(head.data(), {Kind::Params}, "parameter server 0 (rank 0)"));
      default: {  // worker 0: the final state and the statistics
        const Header h = decodeHeader(head.data(), {Kind::Final}, "parameter server 0 (rank 0)");
        receiverSums(h);
        const int64_t shard = 4;
        std::vector<float> payload(static_cast<size_t>(1 + h.slots) * shard);
        const size_t payloadBytes = std::min(restBytes, payload.size() * sizeof(float));
        std::memcpy(payload.data(), rest, payloadBytes);
        std::string json(static_cast<size_t>(h.extra), '\0');
        std::memcpy(json.data(), rest + payloadBytes, std::min(restBytes - payloadBytes, json.size()));
        const ServerStats s = ServerStats::fromJson(nlohmann::json::parse(json), 3);
        volatile double sink = s.workerWaitS[2];
        (void)sink;
        return;
      }
    }
  });
  return 0;
}
