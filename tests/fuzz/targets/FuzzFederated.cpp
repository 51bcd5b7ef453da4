// Federated learning's messages about a client's round (federated/ClientMessages.h)
// as the receiver reads them. Byte 0 picks the message, byte 1 the number of
// client slots of the round (0-3); the rest is the message, zero-padded:
//   even: a host's update to the server (--deadline-clock wall) during round 2,
//         with a model of 3 floats
//   odd:  a client's record in the simulated clock's exchange (mean loss and
//         steps as doubles, then the delta)
#include <cstring>
#include <vector>

#include "federated/ClientMessages.h"
#include "fuzz/FuzzInput.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dtrain::federated;
  if (size < 2) return 0;
  constexpr size_t kModel = 3;
  const size_t slots = data[1] % 4;
  std::vector<float> m(kUpdateHeaderFloats + kModel, 0.0f);
  std::memcpy(m.data(), data + 2, std::min(size - 2, m.size() * sizeof(float)));
  dtrain::fuzz::expectErrorsOnly([&] {
    if (data[0] % 2 == 0) {
      if (auto update = readClientUpdate(m.data(), kModel, 2, slots, 1)) {
        std::vector<ClientResult> results(slots);
        results.at(update->first) = std::move(update->second);  // at(): a slot past the check would throw here
        volatile float sink = results[update->first].delta[kModel - 1];
        (void)sink;
      }
    } else {
      double head[2];
      std::memcpy(head, m.data(), sizeof head);
      volatile int64_t steps = clientStepsFromPeer(head[1], "rank 1");
      (void)steps;
    }
  });
  return 0;
}
