// Sandblaster's messages (parallel/sandblaster/ShardProtocol.h, UnitProtocol.h)
// as their receivers read them. Byte 0 sets the shard's slice (0-4 floats: its
// value mod 5) and whether the run has shards (the next bit: what a worker
// accepts as the parameters' source);
// then records, each a byte that picks the message and its bytes:
//   0  a coordinator command (4 doubles) to a shard's ShardState, with the
//      vectors kInit receives taken from the input; an evaluation whose every
//      unit is in is finished as the shard's loop does
//   1  a worker's gradient head (2 doubles) and its slice, to the same shard
//   2  a shard's reply (3 doubles), as the coordinator reads its history length
//   3  a unit header (int64s) as a worker reads it
//   4  a worker's answer head (3 doubles), as the coordinator reads it
// The shard keeps its state from record to record; the first error ends the
// input, as it ends a run.
#include <cstring>
#include <stdexcept>
#include <vector>

#include "fuzz/FuzzInput.h"
#include "parallel/sandblaster/ShardState.h"
#include "parallel/sandblaster/UnitProtocol.h"

namespace {

using namespace dtrain::parallel::sandblaster;

struct Bytes {
  const uint8_t* at;
  size_t left;
  void take(void* out, size_t n) {
    if (n > left) throw std::runtime_error("input used up");
    if (n) std::memcpy(out, at, n);
    at += n;
    left -= n;
  }
};

// The coordinator's end of the shard's link: vectors come from the input (a
// byte for each, so that kInit with a slice of 0 floats cannot loop for ever).
class InputLink : public ShardLink {
 public:
  explicit InputLink(Bytes& in) : in_(in) {}
  void reply(shard::Reply r) override { last = r; }
  void sendVector(const std::vector<float>& v) override { sent += v.size(); }
  void recvVector(std::vector<float>& v) override {
    uint8_t charge;
    in_.take(&charge, 1);
    v.assign(n, 0.0f);
    in_.take(v.data(), v.size() * sizeof(float));
  }
  size_t n = 0;
  shard::Reply last;
  size_t sent = 0;

 private:
  Bytes& in_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  Bytes in{data + 1, size - 1};
  InputLink link(in);
  link.n = data[0] % 5;
  const int servers = (data[0] / 5) % 2 ? 2 : 0;
  ShardState state(link.n, link);
  dtrain::fuzz::expectErrorsOnly([&] {
    while (in.left > 0) {
      uint8_t kind;
      in.take(&kind, 1);
      switch (kind % 5) {
        case 0: {
          shard::Command c;
          in.take(&c, sizeof c);
          if (shard::opOf(c) == shard::Op::kDone) return;
          state.handle(c);
          break;
        }
        case 1: {
          double head[2];
          in.take(head, sizeof head);
          std::vector<float> grad(link.n);
          in.take(grad.data(), grad.size() * sizeof(float));
          state.acceptGradient(shard::decodeGradHead(head), grad);
          break;
        }
        case 2: {
          shard::Reply r;
          in.take(&r, sizeof r);
          volatile int64_t pairs = shard::replyPairs(r, 0);
          (void)pairs;
          break;
        }
        case 3: {
          int64_t h[unit::kHeaderSize];
          in.take(h, sizeof h);
          const unit::UnitHeader u = unit::decodeUnitHeader(h, servers);
          // What the worker allocates for the samples (bounded by the decoder).
          volatile int64_t bytes =
              dtrain::shapeNumel(u.x.shape) * static_cast<int64_t>(dtrain::dtypeSize(u.x.dtype)) +
              dtrain::shapeNumel(u.y.shape) * static_cast<int64_t>(dtrain::dtypeSize(u.y.dtype));
          (void)bytes;
          break;
        }
        default: {
          unit::AnswerHead a;
          in.take(&a, sizeof a);
          volatile int64_t unitIndex = unit::decodeAnswer(a, 0).unit;
          (void)unitIndex;
          break;
        }
      }
      if (state.evaluationComplete()) state.finishEvaluation();
    }
  });
  return 0;
}
