#pragma once
// --timeline FILE: Chrome trace-event JSON (opens in Perfetto or chrome://tracing).
// Each rank is a process (pid = rank, named "rank r") with two lanes: compute
// (data, forward, backward, optimizer, waits) and comm (each bucket's allreduce),
// so the overlap of communication with backward is visible. Spans are "X"
// (complete) events with ts/dur in microseconds. Thread-safe: the ranks of the
// local backend and their communication threads record into one Timeline.
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "comm/Communicator.h"
#include "parallel/SpanRecorder.h"

namespace dtrain::runtime {

class Timeline {
 public:
  Timeline();
  ~Timeline();  // out of line: RankRecorder is defined in the .cpp
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // The recorder of rank `rank` (created on first use; stable address).
  parallel::SpanRecorder* recorder(int rank);
  // Timestamps are written relative to this origin (nowMicros() units). Ranks in
  // different processes each set it right after a common barrier, which aligns
  // their clocks to within the barrier's latency.
  void setOrigin(double originUs) { origin_ = originUs; }

  void add(int pid, parallel::Lane lane, std::string_view name, std::string_view category,
           double startUs, double endUs);
  // A span on worker thread `worker` of rank `pid`, a lane of its own below
  // compute and comm (federated clients train on a pool of threads).
  void addWorkerSpan(int pid, int worker, std::string_view name, std::string_view category,
                     double startUs, double endUs);
  size_t size() const;
  // This timeline's events (with the process/thread name records) as a JSON
  // array, e.g. to send to the rank that writes the file.
  std::string serialize() const;
  // Writes {"traceEvents": [...]} with the events of every part (serialize()
  // outputs), atomically (FILE.tmp then rename). Throws naming the file.
  static void write(const std::string& path, const std::vector<std::string>& parts);
  void write(const std::string& path) const { write(path, {serialize()}); }
  // Collective over `comm` (a rank per process): rank 0 writes every rank's events.
  void writeGathered(comm::Communicator& comm, const std::string& path) const;

 private:
  class RankRecorder;
  struct Event {
    int pid;
    int tid;
    std::string name, category;
    double ts, dur;
  };
  mutable std::mutex mu_;
  std::vector<Event> events_;
  std::vector<std::unique_ptr<RankRecorder>> recorders_;
  double origin_ = 0;
};

}  // namespace dtrain::runtime
