#pragma once
// The messages between parameter-server workers and servers. Every message
// starts with a Header; payloads are float arrays the size of the server's
// shard. Tags keep the streams apart (each stream is FIFO per sender):
//
//  worker -> server   kInitTag   Init: worker 0's parameters (+ optimizer state)
//                     kPushTag   Push: a gradient shard (flag kWantParams: reply with parameters)
//                     kCtrlTag   Pull (parameters only), Done (end of this worker's run)
//  server -> server   kNormTag   sync --clip-grad-norm: a double, the squared norm of
//                                the sender's shard of the step's mean gradient
//  server -> worker   kReplyTag  Params: the shard's current parameters
//                     kFinalTag  Final (to worker 0): a header, then a payload of
//                                parameters + optimizer state, then the statistics JSON
//
// Liveness travels apart, as heartbeats on a communicator of its own (Heartbeat.h).
//
// Header::seq counts the pushes a worker sent to this server before the
// message: a server handles a Pull or Done only after those pushes, so a worker
// always reads its own writes although pushes and pulls travel on two tags.
#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/Memory.h"

namespace dtrain::parallel::ps {

inline constexpr int kInitTag = 7001;
inline constexpr int kPushTag = 7002;
inline constexpr int kCtrlTag = 7003;
inline constexpr int kReplyTag = 7004;
inline constexpr int kFinalTag = 7005;
inline constexpr int kNormTag = 7006;
inline constexpr int kNeverTag = 7099;  // never sent: a receive that fails only when the job aborts

enum class Kind : int32_t { Init = 1, Push, Pull, Done, Params, Final };

// Header::flags
inline constexpr int32_t kWantParams = 1;  // push: reply with the parameters
inline constexpr int32_t kFinished = 2;    // reply: the run is over (sync): stop
inline constexpr int32_t kDropped = 4;     // reply: this push arrived too late (sync backup)

struct Header {
  Kind kind = Kind::Push;
  int32_t worker = 0;    // sender's worker index (worker -> server)
  int64_t step = 0;      // push: the worker's last step in it; pull: the step about to run
  int64_t seq = 0;       // pushes this worker sent to this server before this message
  int64_t version = 0;   // push: server version the gradient was computed on; reply: current
  int64_t minClock = 0;  // reply: steps completed by the slowest live worker
  int64_t total = 0;     // init: floats of the whole model (a consistency check)
  int64_t optSteps = 0;  // init/final: optimizer step count of the shard's parameters
  int64_t extra = 0;     // final: bytes of statistics JSON that follow
  double lr = 0;         // push: learning rate
  double waitS = 0;      // done: the worker's time blocked on the servers
  std::array<int64_t, memory::RankMemory::kFields> memory{};  // done: the worker's memory_per_rank
  int32_t flags = 0;
  int32_t slots = 0;     // init/final: optimizer state arrays after the parameters
};
static_assert(sizeof(Header) % sizeof(float) == 0, "the payload follows the header");
static_assert(std::is_trivially_copyable_v<Header>, "headers travel as bytes");

// Bounds on what a Final message's header may announce (its sizes come from a
// peer): optimizer state arrays per parameter, bytes of statistics JSON.
inline constexpr int32_t kMaxOptimizerSlots = 8;
inline constexpr int64_t kMaxStatsBytes = int64_t{64} << 20;

inline constexpr int64_t kHeaderFloats = sizeof(Header) / sizeof(float);

// A message's header, at the start of its float buffer.
inline Header readHeader(const float* buf) {
  Header h;
  std::memcpy(static_cast<void*>(&h), buf, sizeof h);
  return h;
}
inline void writeHeader(float* buf, const Header& h) { std::memcpy(buf, &h, sizeof h); }

}  // namespace dtrain::parallel::ps
