#pragma once
// A rank's flight recorder: its last kFlightEntries collective and point-to-point
// calls (kind, sequence number, bytes, peer or group, posted/start/end, and the
// step and phase they belong to) in a fixed ring, plus the phase the rank is in
// now. The Communicator layer fills it, so every backend and strategy does; the
// trainer and the strategies name the step and phase (enterPhase / setStep).
// What it is for: when a run hangs, every rank dumps it and one names the rank
// that never entered the call the others wait in (comm/HangDiagnosis.h).
//
// Cost: a call takes one uncontended lock and a copy into a preallocated slot
// on entry and on exit; nothing is allocated per call. A rank's communicators
// (its world and the sub-communicators split from it) share one recorder.
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "comm/CollectiveTypes.h"

namespace dtrain::comm {

inline constexpr int kFlightEntries = 64;

// Calls the ring records: the collectives (OpKind's values) and user point-to-point.
enum class FlightKind : uint8_t {
  Allreduce, Broadcast, Reduce, Allgather, Allgatherv, ReduceScatter, Alltoall, Barrier, Split,
  Send, Recv, Isend, Irecv
};
const char* flightKindName(FlightKind kind);
inline FlightKind flightKindOf(OpKind k) { return static_cast<FlightKind>(k); }

// One call as a peer sees it (fixed size: it travels in the mpi heartbeat).
struct FlightCall {
  uint64_t seq = 0;     // per-communicator call number (the layer's "#N")
  uint64_t bytes = 0;
  int64_t step = -1;    // the step it belongs to (-1: before the first)
  uint32_t commId = 0;  // 1: the world; a split's id derives from its parent's and color
  int32_t peer = -1;    // point-to-point: the peer's rank in that communicator
  uint16_t commSize = 0;
  FlightKind kind = FlightKind::Barrier;
  uint8_t open = 0;     // still running
  char phase[16]{};     // the phase it was issued in ("backward")
  float ageS = 0;       // open: since it was posted; else since it ended
  float postedAgeS = 0; // since it was posted
};

// What a rank is doing, as one fixed-size record: enough to say which call it
// waits in, or, when it waits in none, what it last did and how long ago.
struct FlightState {
  int32_t rank = -1;
  uint8_t known = 0;    // 0: nothing heard of this rank
  uint8_t hasOpen = 0, hasLatest = 0, nComms = 0;
  int64_t step = -1;
  char phase[16]{};     // the phase it entered last
  float phaseAgeS = 0;  // since it entered it
  FlightCall oldestOpen;  // where its progress stopped (the first call still open)
  FlightCall latest;      // the last call it entered, open or not
  std::array<uint32_t, 8> comms{};  // the communicators it belongs to
  std::array<uint64_t, 8> entered{};  // per communicator: collectives entered (the next #)
  char host[32]{};
  float silentS = -1;   // mpi: since its last heartbeat arrived (-1: in-process)
  uint8_t silent = 0;   // mpi: longer than --comm-timeout (what it says is as of then)
  bool member(uint32_t commId) const;
  // Whether it entered collective #seq of `commId` (or a later one).
  bool enteredCall(uint32_t commId, uint64_t seq) const;
};

class FlightRecorder {
 public:
  explicit FlightRecorder(int rank);
  int rank() const { return rank_; }

  // The calling thread's rank: its phase marks go to this recorder (a rank's
  // top-level communicator binds the thread that creates it).
  static void bindThread(std::shared_ptr<FlightRecorder> recorder);
  static FlightRecorder* current();

  // A call entered (posted); returns the token that end() takes.
  uint64_t begin(FlightKind kind, uint64_t seq, uint64_t bytes, int peer, uint32_t commId,
                 int commSize);
  void start(uint64_t token);  // it began to run (async calls queue first)
  void end(uint64_t token, bool failed);
  void joinComm(uint32_t commId);

  void setStep(int64_t step);
  int64_t step() const;
  void enterPhase(const char* phase);  // a string literal (kept by pointer)

  FlightState state() const;
  // {"rank", "host", "step", "phase", "phase_age_s", "calls": [oldest first, ...]}.
  std::string json() const;

 private:
  struct Entry {
    uint64_t token = 0;  // 0: empty slot
    uint64_t seq = 0, bytes = 0;
    int64_t step = -1;
    double postUs = 0, startUs = 0, endUs = 0;
    const char* phase = "";
    uint32_t commId = 0;
    int32_t peer = -1;
    uint16_t commSize = 0;
    FlightKind kind = FlightKind::Barrier;
    bool failed = false;
  };
  Entry* find(uint64_t token);
  FlightCall view(const Entry& e, double nowUs) const;

  const int rank_;
  std::string host_;
  mutable std::mutex mutex_;
  std::array<Entry, kFlightEntries> ring_{};
  uint64_t next_ = 0;  // tokens handed out (the ring's slot is token % size)
  int64_t step_ = -1;
  const char* phase_ = "setup";
  double phaseStartUs_ = 0;
  std::array<uint32_t, 8> comms_{};
  std::array<uint64_t, 8> entered_{};
  int nComms_ = 0;
};

// The calling thread's rank's step and phase (no-ops on a thread without a rank).
namespace flight {
void setStep(int64_t step);
void enterPhase(const char* phase);
// Where ranks write their recorder when a run hangs (a run directory, or the
// checkpoint directory; empty: the working directory). Process-wide; set by
// flight::enableReports (HangReport.h).
void setDumpDir(const std::string& dir);
std::string dumpDir();
// Writes `recorder`'s ring as DIR/flight-rank<R>.json (atomically); returns the
// path, or an empty string (with no exception) when it cannot be written.
std::string dump(const FlightRecorder& recorder);
// Test hook DTRAIN_TEST_SKIP_CALL=R:S: rank R does not enter its first collective
// of step S (it waits elsewhere instead). True when `rank` at `step` is that.
bool skipHookFires(int rank, int64_t step);
}  // namespace flight

}  // namespace dtrain::comm
