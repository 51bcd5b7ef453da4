#pragma once
// What the emulated network costs the cores the ranks compute on.
//
// scripts/netsim.sh's hosts are network namespaces of one machine: the
// kernel's work for every byte between them (TCP, the veth pair, the token
// bucket) and the MPI ranks' own copies and progress run on that machine's
// cores, the same ones training computes on. Measured by taking it away from
// compute: probe threads, one a core, count their work for a while with the
// network idle and for a while with every emulated host streaming to the next
// (1 MiB messages in a ring, over dtrain's own MPI transport); the core time
// lost over the bytes sent in that window is the link's core_s_per_byte.
// It follows the time a link is busy more than its bytes (the token bucket's
// timers, TCP's pacing: a slow link keeps the cores about as busy as a fast
// one for a tenth of the bytes); so a machine file holds it for its own rate.
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace dtrain::calibrate {

// Work the probe threads (`threads` of them, a core each) get done in
// `seconds`: a count of fixed units of floating-point work.
double computeProbe(int threads, double seconds);

// One rank's log of its streaming: (steady-clock seconds, bytes sent so far).
using StreamLog = std::vector<std::pair<double, double>>;

// Bytes all ranks sent between steady-clock times t0 and t1, each log read on
// the line between its points.
double bytesBetween(const std::vector<StreamLog>& logs, double t0, double t1);

// The ranks' side (`dtrain calibrate --internal-stream FILE` under mpirun, one
// rank a host): each sends 1 MiB messages to the next rank and receives from
// the previous one, pausing while `FILE.pause` exists, until `FILE.stop` does
// (rank 0 looks, and tells the others) or maxSeconds pass. Rank 0 creates
// `FILE.started` after the first exchange; each rank writes its log to
// `FILE.<rank>`.
void runStreamRank(const std::string& file, double maxSeconds);

// The parent's side, while runStreamRank's ranks run: waits for
// `file.started` (nothing when `failed()` turns true first, or after
// waitSeconds), then `pairs` times runs the probe for `seconds` with the
// streams paused and for `seconds` beside them; creates `file.stop`.
struct ProbePair {
  double aloneT0 = 0, aloneS = 0, aloneWork = 0;  // the probe with the network idle
  double t0 = 0, t1 = 0, busyWork = 0;  // beside the streams: its steady-clock window
};
std::vector<ProbePair> probeBesideStreams(const std::string& file, int threads, double seconds, int pairs,
                                          double waitSeconds, const std::function<bool()>& failed);

// The core seconds the probe lost beside the traffic: what it did alone in as
// long, minus what it did beside it, in core seconds (negative: noise).
double lostCoreSeconds(const ProbePair& pair, int threads);
// The link's core seconds per byte from one pair: lostCoreSeconds over the
// bytes sent in its window; 0 when nothing was lost or sent.
double coreSecondsPerByte(const ProbePair& pair, int threads, double bytes);

// Reads FILE.0 .. FILE.<ranks - 1> (and removes them with the marker files).
std::vector<StreamLog> readStreamLogs(const std::string& file, int ranks);

}  // namespace dtrain::calibrate
