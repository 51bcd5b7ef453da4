#include "comm/mpi/Liveness.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>

#include "comm/FlightRecorder.h"
#include "comm/HangReport.h"
#include "core/Error.h"
#include "core/Resumed.h"

namespace dtrain::comm::mpi {

namespace {

using BeatClock = std::chrono::steady_clock;
// Below MPI's guaranteed tag bound (32767); nothing else uses MPI_COMM_WORLD.
constexpr int kBeatTag = 32001;

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(BeatClock::now().time_since_epoch()).count();
}

// What a beat carries: its sender's flight state (HangReport.h: how a peer that
// stops is still described), its latest request that every peer dump its
// flight recorder, and the latest request of the receiver that it has served.
struct Beat {
  FlightState state;
  uint32_t requestGen = 0;
  uint32_t servedGen = 0;
};

std::mutex gRecorderMutex;
std::shared_ptr<FlightRecorder> gRecorder;  // this process's rank's

std::shared_ptr<FlightRecorder> ownRecorder() {
  std::lock_guard<std::mutex> lock(gRecorderMutex);
  return gRecorder;
}

class BeatThread {
 public:
  BeatThread(Millis limit, int rank, int size)
      : limit_(limit), rank_(rank), size_(size), lastHeardNs_(new std::atomic<int64_t>[size]),
        heard_(size), servedFor_(size, 0), ackFrom_(size, 0) {
    const int64_t start = nowNs();
    for (int k = 0; k < size; ++k) lastHeardNs_[k].store(start);
    period_ = std::clamp(limit / 5, Millis{50}, Millis{1000});
    thread_ = std::thread([this] { loop(); });
  }
  ~BeatThread() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Millis limit() const { return limit_; }
  int size() const { return size_; }
  int64_t lastHeardNs(int worldRank) const { return lastHeardNs_[worldRank].load(std::memory_order_relaxed); }
  // After this process was stopped and continued (core/Resumed.h) every peer
  // counts as heard now: its silence was this process's own (when the whole
  // job was suspended, the peers' beats resume within a period).
  void forgiveOwnStop() {
    if (!resumed_.continued()) return;
    const int64_t now = nowNs();
    for (int k = 0; k < size_; ++k) lastHeardNs_[k].store(now, std::memory_order_relaxed);
  }

  // Every rank's flight state: this one's now, the peers' as of their last
  // beat, aged by the time since it came (and marked with that silence).
  std::vector<FlightState> states() {
    std::vector<FlightState> out(size_);
    const int64_t now = nowNs();
    {
      std::lock_guard<std::mutex> lock(beatsMutex_);
      for (int p = 0; p < size_; ++p) {
        if (p == rank_) continue;
        const float since = static_cast<float>((now - lastHeardNs(p)) / 1e9);
        if (!heard_[p].state.known) {  // no beat with its state yet: only its silence
          out[p].silentS = since;
          out[p].silent = since * 1000 > limit_.count();
          continue;
        }
        FlightState s = heard_[p].state;
        s.phaseAgeS += since;
        s.oldestOpen.ageS += since;
        s.latest.ageS += since;
        s.oldestOpen.postedAgeS += since;
        s.latest.postedAgeS += since;
        s.silentS = since;
        s.silent = since * 1000 > limit_.count();
        out[p] = s;
      }
    }
    if (auto rec = ownRecorder()) out[rank_] = rec->state();
    for (int p = 0; p < size_; ++p) out[p].rank = p;
    return out;
  }

  // Asks every peer to dump its recorder; waits until each peer that still
  // beats has said it did, at most a few beat periods.
  void requestDumps() {
    const uint32_t gen = ++requestGen_;
    beatNow_ = true;
    const int64_t until = nowNs() + (4 * period_ + Millis{1000}).count() * 1000000;
    for (;;) {
      bool all = true;
      {
        std::lock_guard<std::mutex> lock(beatsMutex_);
        for (int p = 0; p < size_; ++p)
          if (p != rank_ && ackFrom_[p] < gen && nowNs() - lastHeardNs(p) < 2 * period_.count() * 1000000)
            all = false;
      }
      if (all || nowNs() > until) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

 private:
  void loop() {
    // A dead link must not end the job through MPI's default handler (with its
    // own message): beats are best effort, the silence is what counts.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    std::vector<MPI_Request> sends(size_, MPI_REQUEST_NULL);
    std::vector<Beat> out(size_);  // one buffer per peer: a send's stays untouched until done
    Beat got;
    constexpr int kBytes = static_cast<int>(sizeof(Beat));
    MPI_Request recv = MPI_REQUEST_NULL;
    MPI_Irecv(&got, kBytes, MPI_BYTE, MPI_ANY_SOURCE, kBeatTag, MPI_COMM_WORLD, &recv);
    auto nextBeat = BeatClock::now();
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      lock.unlock();
      for (;;) {  // every beat that has arrived
        int flag = 0;
        MPI_Status st;
        if (MPI_Test(&recv, &flag, &st) != MPI_SUCCESS || !flag) break;
        if (st.MPI_SOURCE >= 0 && st.MPI_SOURCE < size_ && st.MPI_SOURCE != rank_) heard(st.MPI_SOURCE, got);
        MPI_Irecv(&got, kBytes, MPI_BYTE, MPI_ANY_SOURCE, kBeatTag, MPI_COMM_WORLD, &recv);
      }
      if (BeatClock::now() >= nextBeat || beatNow_.exchange(false)) {
        auto rec = ownRecorder();
        const FlightState mine = rec ? rec->state() : FlightState{};
        std::lock_guard<std::mutex> beats(beatsMutex_);
        for (int p = 0; p < size_; ++p) {
          if (p == rank_) continue;
          int done = 1;
          if (sends[p] != MPI_REQUEST_NULL) MPI_Test(&sends[p], &done, MPI_STATUS_IGNORE);
          // One beat in flight per peer: a dead link must not pile them up.
          if (!done) continue;
          out[p] = {mine, requestGen_.load(), servedFor_[p]};
          MPI_Isend(&out[p], kBytes, MPI_BYTE, p, kBeatTag, MPI_COMM_WORLD, &sends[p]);
        }
        nextBeat = BeatClock::now() + period_;
      }
      lock.lock();
      // Receiving is polled: a beat is noticed within 20 ms, and stop at once.
      cv_.wait_for(lock, std::chrono::milliseconds(20), [this] { return stop_; });
    }
    lock.unlock();
    MPI_Cancel(&recv);
    MPI_Wait(&recv, MPI_STATUS_IGNORE);
    for (auto& s : sends)
      if (s != MPI_REQUEST_NULL) MPI_Request_free(&s);  // eager one-byte sends drain on their own
  }

  // A beat from `peer`: it is alive; keep its state; dump when it asks anew.
  void heard(int peer, const Beat& beat) {
    lastHeardNs_[peer].store(nowNs(), std::memory_order_relaxed);
    bool dumpNow = false;
    {
      std::lock_guard<std::mutex> lock(beatsMutex_);
      heard_[peer] = beat;
      ackFrom_[peer] = std::max(ackFrom_[peer], beat.servedGen);
      if (beat.requestGen > servedFor_[peer]) {
        servedFor_[peer] = beat.requestGen;
        dumpNow = true;
      }
    }
    if (dumpNow) {
      if (auto rec = ownRecorder()) flight::dump(*rec);
      beatNow_ = true;  // the answer goes out at once
    }
  }

  Millis limit_;
  Millis period_;
  int rank_, size_;
  std::unique_ptr<std::atomic<int64_t>[]> lastHeardNs_;
  std::mutex beatsMutex_;
  std::vector<Beat> heard_;                     // each peer's last beat
  std::vector<uint32_t> servedFor_, ackFrom_;  // requests served per peer; our requests they served
  std::atomic<uint32_t> requestGen_{0};
  std::atomic<bool> beatNow_{false};
  resumed::Tracker resumed_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

std::mutex gMutex;
std::shared_ptr<BeatThread> gBeat;

std::shared_ptr<BeatThread> current() {
  std::lock_guard<std::mutex> lock(gMutex);
  return gBeat;
}

std::string seconds(Millis m) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", m.count() / 1000.0);
  return buf;
}

// Whether this process prints a hang's diagnosis: on SIGUSR2 rank 0; on a hang
// the lowest rank that waits in a call and still beats (the others wait for it).
bool printsHang(const std::vector<FlightState>& states, bool onSignal, int rank, Millis limit) {
  if (onSignal) return rank == 0;
  for (const FlightState& s : states) {
    if (s.rank >= rank) break;
    const bool alive = s.silentS < 0 || s.silentS * 1000 < limit.count();
    if (s.known && s.hasOpen && alive) {
      // It prints; this rank's abort must not cut it short.
      std::this_thread::sleep_for(std::chrono::seconds(6));
      return true;  // still here: it did not (its view differs); say it once more
    }
  }
  return true;
}

}  // namespace

void startHeartbeat(Millis silenceLimit) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::lock_guard<std::mutex> lock(gMutex);
  if (size < 2 || gBeat) return;
  gBeat = std::make_shared<BeatThread>(silenceLimit, rank, size);
  flight::PeerView view;
  view.states = [] {
    auto beat = current();
    return beat ? beat->states() : std::vector<FlightState>{};
  };
  view.requestDumps = [] {
    if (auto beat = current()) beat->requestDumps();
  };
  view.prints = [rank, silenceLimit](const std::vector<FlightState>& states, bool onSignal) {
    return printsHang(states, onSignal, rank, silenceLimit);
  };
  flight::setPeerView(std::move(view));
}

void setHeartbeatRecorder(std::shared_ptr<FlightRecorder> recorder) {
  std::lock_guard<std::mutex> lock(gRecorderMutex);
  gRecorder = std::move(recorder);
}

void stopHeartbeat() {
  flight::clearPeerView();
  std::shared_ptr<BeatThread> beat;
  {
    std::lock_guard<std::mutex> lock(gMutex);
    beat.swap(gBeat);
  }
  // Joined here, before MPI_Finalize: a checker holds its copy only for a scan.
  while (beat && beat.use_count() > 1) std::this_thread::yield();
  beat.reset();
}

std::vector<SilentPeer> silentPeers(const std::vector<int>& worldRanks, Millis extra) {
  std::vector<SilentPeer> out;
  auto beat = current();
  if (!beat) return out;
  beat->forgiveOwnStop();
  const int64_t now = nowNs();
  const int64_t limitNs = (beat->limit() + extra).count() * 1000000;
  for (int r : worldRanks) {
    if (r < 0 || r >= beat->size()) continue;  // MPI reports a bad peer itself
    const int64_t last = beat->lastHeardNs(r);
    if (now - last > limitNs) out.push_back({r, Millis{(now - last) / 1000000}});
  }
  return out;
}

std::string describeSilent(const std::vector<SilentPeer>& silent) {
  std::string s;
  for (size_t i = 0; i < silent.size(); ++i)
    s += (i ? ", " : "") + std::string("rank ") + std::to_string(silent[i].worldRank);
  auto beat = current();
  const Millis limit = beat ? beat->limit() : Millis{0};
  return dtrain::detail::concat(s, " sent no heartbeat for ", seconds(silent.front().silence),
                                " s (--comm-timeout ", seconds(limit),
                                " s): it died, is stopped or its link is down");
}

void throwIfSilent(const std::vector<int>& worldRanks, const std::string& what) {
  auto silent = silentPeers(worldRanks);
  if (!silent.empty()) throw PeerSilentError(what + ": " + describeSilent(silent));
}

std::vector<int> worldRanksOf(MPI_Comm comm) {
  MPI_Group group, world;
  MPI_Comm_group(comm, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  int n = 0;
  MPI_Group_size(group, &n);
  std::vector<int> mine(n), theirs(n);
  for (int k = 0; k < n; ++k) mine[k] = k;
  MPI_Group_translate_ranks(group, n, mine.data(), world, theirs.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  return theirs;
}

std::vector<int> worldPeersOf(MPI_Comm comm) {
  int me = 0;
  MPI_Comm_rank(comm, &me);
  std::vector<int> all = worldRanksOf(comm);
  all.erase(all.begin() + me);
  return all;
}

}  // namespace dtrain::comm::mpi
