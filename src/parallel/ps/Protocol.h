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
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string_view>
#include <type_traits>

#include "core/Error.h"
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

// Bound on the counters a header carries (steps, pushes, versions, parameter
// counts): far above any run, small enough that what receivers compute with
// them (+1, differences between two of them) cannot overflow.
inline constexpr int64_t kMaxCount = int64_t{1} << 53;

// The header of a message from a peer, checked before any of it is used: its
// kind one of `expected`, every counter in [0, kMaxCount], minClock >= 0 (a
// server with no live worker left sends the largest int64), sizes within the
// bounds above, lr and waitS finite, only known flags. A corrupt or foreign
// message is one line naming the sender and the field, never undefined
// behaviour or a huge allocation (tests/fuzz/targets/FuzzPsMessages.cpp).
inline Header decodeHeader(const float* buf, std::initializer_list<Kind> expected, std::string_view from) {
  const Header h = readHeader(buf);
  auto check = [&](bool ok, std::string_view field, auto value) {
    if (!ok)
      throw Error(detail::concat("parameter server protocol: malformed message from ", from, ": ", field, " ",
                                 value));
  };
  check(std::find(expected.begin(), expected.end(), h.kind) != expected.end(), "kind",
        static_cast<int32_t>(h.kind));
  check(h.worker >= 0, "worker", h.worker);
  for (const auto& [field, v] : {std::pair<std::string_view, int64_t>{"step", h.step},
                                 {"seq", h.seq},
                                 {"version", h.version},
                                 {"total", h.total},
                                 {"optimizer steps", h.optSteps}})
    check(v >= 0 && v <= kMaxCount, field, v);
  check(h.minClock >= 0, "minClock", h.minClock);
  check(h.extra >= 0 && h.extra <= kMaxStatsBytes, "statistics bytes", h.extra);
  check(h.slots >= 0 && h.slots <= kMaxOptimizerSlots, "optimizer slots", h.slots);
  check(std::isfinite(h.lr), "learning rate", h.lr);
  check(std::isfinite(h.waitS) && h.waitS >= 0, "wait seconds", h.waitS);
  check((h.flags & ~(kWantParams | kFinished | kDropped)) == 0, "flags", h.flags);
  return h;
}

}  // namespace dtrain::parallel::ps
