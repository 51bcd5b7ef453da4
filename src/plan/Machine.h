#pragma once
// The machine file (docs/guide/machine-files.md, format "dtrain-machine-1"):
// what `dtrain calibrate` measured, or a hand-written description of a
// cluster (plan/clusters/*.json), read by `dtrain simulate` and `dtrain plan`.
// Every time in seconds, size in bytes, rate per second; a message of b bytes
// costs alpha_s + b / bytes_per_s. Reading refuses what a typo or a wrong
// number would silently turn into a wrong prediction: unknown keys, wrong
// types, negative or zero rates, another format tag (one line, UsageError).
#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace dtrain::plan {

inline constexpr const char* kMachineFormat = "dtrain-machine-1";

// alpha-beta: the time of one message of b bytes is alphaS + b / bytesPerS.
struct LinkCost {
  double alphaS = 0;
  double bytesPerS = 0;
  // An emulated link's token bucket (scripts/netsim.sh's tbf): after an idle
  // moment this many bytes pass at memory speed. 0 for a real link.
  double burstBytes = 0;
  // Core time the hosts' kernels spend on each byte that crosses the link
  // (TCP, veth, the token bucket): on emulated hosts it runs on the cores the
  // ranks compute on. 0: not measured (or hosts whose NICs do that work).
  double coreSPerByte = 0;
  double time(double bytes) const { return alphaS + bytes / bytesPerS; }
  // The link time a full bucket saves a message of `bytes`, and the idle
  // time that refills an empty one.
  double burstSaving(double bytes) const { return std::min(bytes, burstBytes) / bytesPerS; }
  double refillS() const { return burstBytes / bytesPerS; }
};

// A calibrated fit of a whole collective at the ranks it was measured on.
struct CollectiveFit {
  int ranks = 0, ranksPerHost = 0;
  LinkCost cost;
  // calibrate's measurements, (bytes, seconds) by size: where a message falls
  // between two of them its time is read between them, not off the fit (a
  // straight line misses sizes where an algorithm runs far off it, such as
  // recursive halving at the size of an emulated link's token bucket).
  std::vector<std::pair<double, double>> samples;
  double time(double bytes) const;
};

// Where two ranks talk: threads of one process, processes of one host, hosts.
// InterHostShared: collectives only (calibrate's fits measured with several
// ranks per host sharing each host's link and cores).
enum class LinkKind { SameProcess, IntraHost, InterHost, InterHostShared };
const char* linkKindName(LinkKind k);

// Measured compute of one of dtrain's models at one micro-batch size.
struct LayerTime {
  std::string name;
  int64_t params = 0;
  double forwardS = 0, backwardS = 0;
  int64_t activationBytes = 0;
};
struct ModelTime {
  double forwardS = 0, backwardS = 0, updateS = 0;
  std::vector<LayerTime> layers;
};
struct ModelCalibration {
  std::string precision = "fp32";
  int threads = 1;
  std::string optimizer;  // the optimizer update_s was measured with ("": not said)
  int64_t params = 0;     // the model's parameters when measured (0: not said)
  // How much slower than its share a rank computes where ranks outnumber the
  // cores (calibrate/CoreSharing.h; 1: not measured).
  double sharedSlowdown = 1;
  // How much slower than alone a rank computes where the cores' other ranks
  // wait for messages, as many computing as cores and as many waiting
  // (calibrate/CoreSharing.h; 1: not measured).
  double waitingSlowdown = 1;
  std::map<int64_t, ModelTime> microBatches;  // by micro-batch size
  // The measured size nearest `mbs` by ratio (a measured 8 stands for 6 better
  // than a measured 2 does) and its times; null when none was measured.
  const std::pair<const int64_t, ModelTime>* nearest(int64_t mbs) const;
  // The times at `mbs`: read on the line between the measured sizes around it
  // (a micro-batch's time is a fixed part, the weights read once, plus a part
  // per sample, and the fixed part dominates small sizes: stretching a measured
  // 8 to 64 would count the fixed part 8 times); beyond the
  // largest (or with one size) in proportion to the nearest; nullopt when
  // none was measured.
  std::optional<ModelTime> at(int64_t mbs) const;
};

struct Machine {
  std::string name;
  std::optional<int> hosts;
  int devicesPerHost = 1;
  // Emulated hosts on one machine (dtrain calibrate --netsim): every host's
  // ranks share these cores, so a rank computes at shared / ranks-at-once of
  // the measured rate once the run's ranks outnumber them (0: hosts own their cores).
  int sharedCores = 0;
  // What a sum between ranks of one host costs beyond its own time where
  // ranks outnumber the cores: the partner may wait for a core.
  // (ranks a core, seconds) by increasing ranks (calibrate/CoreSharing.h); empty: not measured.
  std::vector<std::pair<double, double>> pairedSumWaits;
  // Whether a point-to-point message goes out while its sender computes on
  // (GPUs' copy engines, NCCL: true, the default). dtrain calibrate writes
  // false: Open MPI's TCP transport progresses a large isend only inside MPI
  // calls, so a pipeline stage is busy while it sends.
  bool asyncSends = true;
  int64_t memoryPerDeviceBytes = 0;
  std::map<std::string, double> flopsPerS;  // by precision: fp32, bf16, fp16
  double memoryBytesPerS = 0;
  std::map<LinkKind, LinkCost> links;
  // collectives[link][algorithm], e.g. [InterHost]["allreduce_ring"].
  std::map<LinkKind, std::map<std::string, CollectiveFit>> collectives;
  std::map<std::string, ModelCalibration> models;

  // The GEMM rate at `precision` (fp32 when the file has no other).
  double flops(const std::string& precision) const;
  // The link, falling back to the next slower kind the file describes.
  const LinkCost& link(LinkKind k) const;
  // pairedSumWaits at `ranksPerCore`: 0 up to 1 a core, read on the line
  // between the measured points, beyond the last on the line through the last two.
  double pairedSumWaitS(double ranksPerCore) const;
  // The calibrated fit of `algo` over `k`, if the file has one.
  const CollectiveFit* collective(LinkKind k, const std::string& algo) const;
};

// The part of a core a rank's compute takes, `share` ranks to a core (a share
// of 2: half the rate), slowed by `slowdown` (ModelCalibration::sharedSlowdown,
// measured at 2 ranks a core) once the ranks outnumber the cores: in full from
// 2 a core, in proportion between 1 and 2.
double oversubscribedShare(double share, double slowdown);

// A rank waiting for a message where ranks outnumber the cores takes part of
// a core from the computing ones (Open MPI's yielding wait stays runnable): its
// weight against a computing rank's 1, in [0, 1], such that as many ranks
// computing as cores, each beside one waiting, compute at
// oversubscribedShare(1 + weight, sharedSlowdown), the measured
// waitingSlowdown (ModelCalibration).
double waitingWeight(double waitingSlowdown, double sharedSlowdown);

// Reads and validates a machine file; one-line UsageError naming the file and
// the key on any problem (a missing file too).
Machine readMachine(const std::string& path);
// The same from JSON text; `name` stands for the file in messages.
Machine parseMachine(const std::string& text, const std::string& name);

}  // namespace dtrain::plan
