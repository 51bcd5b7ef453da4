#include "calibrate/CommProbe.h"

#include <algorithm>
#include <functional>

#include "core/Error.h"
#include "core/Timer.h"

namespace dtrain::calibrate {

using comm::Algorithm;
using comm::Communicator;
using comm::Options;
using comm::ReduceOp;

namespace {

float maxOverRanks(Communicator& comm, float v) {
  comm.allreduce(&v, &v, 1, DType::F32, {.op = ReduceOp::Max});
  return v;
}

// Seconds per call of `call` (the slowest rank's), the median of the runs; the
// call count per run comes from a warm-up call, agreed on by every rank. The
// runs of one size go back to back, as a training step's collectives follow
// each other. (Runs in passes over every collective and size, the model
// times' remedy for a slow moment of the machine, do not fit here: a call
// after a pause on the emulated links costs far more than the same call back
// to back, which is how training runs them.)
double timeCall(Communicator& comm, const ProbeConfig& cfg, const std::function<void()>& call) {
  Timer warm;
  call();
  const float first = maxOverRanks(comm, static_cast<float>(warm.seconds()));
  const int calls = std::clamp(static_cast<int>(cfg.secondsPerRun / std::max(first, 1e-7f)), 1, 200);
  std::vector<double> perCall;
  auto timeRuns = [&](int runs) {
    for (int run = 0; run < runs; ++run) {
      comm.barrier();
      Timer t;
      for (int i = 0; i < calls; ++i) call();
      perCall.push_back(maxOverRanks(comm, static_cast<float>(t.seconds() / calls)));
    }
  };
  timeRuns(cfg.runs);
  // Runs that disagree (some calls stalled, some not: 4 ranks spinning on 2
  // cores) make the median of a few a coin toss between the two, and
  // calibrations would disagree with each other by up to 2x. More runs there.
  // (Every rank sees the same maxima, so every rank takes the same branch.)
  const auto [lo, hi] = std::minmax_element(perCall.begin(), perCall.end());
  if (*lo > 0 && *hi > cfg.spreadForMoreRuns * *lo) timeRuns(cfg.moreRuns);
  return median(perCall);
}

}  // namespace

std::vector<size_t> messageSizes(size_t minBytes, size_t maxBytes) {
  std::vector<size_t> out;
  for (size_t b = minBytes; b <= maxBytes; b *= 4) out.push_back(b);
  if (out.size() < 2) out = {minBytes, minBytes * 4};
  return out;
}

ProbeResult probeComm(Communicator& comm, const ProbeConfig& cfg) {
  DTRAIN_CHECK(!cfg.sizes.empty(), "calibrate: no message sizes");
  const int n = comm.size(), me = comm.rank();
  const size_t largest = *std::max_element(cfg.sizes.begin(), cfg.sizes.end());
  std::vector<float> a(largest / 4 + n, 1.0f), b(largest / 4 + n, 0.0f);
  ProbeResult r;

  const int partner = cfg.ranksPerHost < n ? cfg.ranksPerHost : 1;
  if (cfg.pointToPoint && n > 1) {
    for (size_t bytes : cfg.sizes) {
      const size_t count = bytes / 4;
      const double rtt = timeCall(comm, cfg, [&] {
        if (me == 0) {
          comm.send(a.data(), count, DType::F32, partner, 1);
          comm.recv(a.data(), count, DType::F32, partner, 2);
        } else if (me == partner) {
          comm.recv(a.data(), count, DType::F32, 0, 1);
          comm.send(a.data(), count, DType::F32, 0, 2);
        }
      });
      r.pointToPointSamples.push_back({static_cast<double>(count * 4), rtt / 2});
    }
    r.pointToPoint = fitAlphaBeta(r.pointToPointSamples);
  }

  // Each collective on b bytes of the whole vector (see the header).
  using Run = std::function<void(size_t perRank)>;
  std::vector<std::pair<std::string, Run>> collectives = {
      {"allreduce_ring",
       [&](size_t c) { comm.allreduce(a.data(), a.data(), c * n, DType::F32, {.algo = Algorithm::Ring}); }},
      // The other algorithms the trainer's auto runs (comm::Communicator::autoAllreduce).
      {"allreduce_tree",
       [&](size_t c) { comm.allreduce(a.data(), a.data(), c * n, DType::F32, {.algo = Algorithm::Tree}); }},
      {"allreduce_rhd",
       [&](size_t c) { comm.allreduce(a.data(), a.data(), c * n, DType::F32, {.algo = Algorithm::Rhd}); }},
      {"allgather_ring", [&](size_t c) { comm.allgather(a.data(), b.data(), c, DType::F32); }},
      {"reduce_scatter_ring", [&](size_t c) { comm.reduceScatter(a.data(), b.data(), c, DType::F32); }},
      {"broadcast", [&](size_t c) { comm.broadcast(a.data(), c * n, DType::F32); }},
  };
  if (cfg.hierOnly) collectives.clear();
  if (cfg.hier || cfg.hierOnly)
    collectives.insert(collectives.begin() + (collectives.empty() ? 0 : 1),
                       {"allreduce_hier", [&](size_t c) {
                          Options o{.algo = Algorithm::Hier, .groupSize = cfg.ranksPerHost};
                          comm.allreduce(a.data(), a.data(), c * n, DType::F32, o);
                        }});
  if (n < 2) return r;
  for (auto& [name, run] : collectives) {
    CollectiveFit f{name, n, cfg.ranksPerHost, {}, {}};
    for (size_t bytes : cfg.sizes) {
      const size_t perRank = std::max<size_t>(1, bytes / 4 / n);
      std::fill(a.begin(), a.end(), 1.0f);  // sums stay finite over the repeats
      const double s = timeCall(comm, cfg, [&] { run(perRank); });
      f.samples.push_back({static_cast<double>(perRank * n * 4), s});
    }
    f.fit = fitAlphaBeta(f.samples);
    r.collectives.push_back(std::move(f));
  }
  return r;
}

nlohmann::json samplesJson(const std::vector<Sample>& samples) {
  auto j = nlohmann::json::array();
  for (const Sample& s : samples) j.push_back({s.bytes, s.seconds});
  return j;
}

namespace {

std::vector<Sample> samplesFrom(const nlohmann::json& j) {
  std::vector<Sample> out;
  for (const auto& p : j) out.push_back({p.at(0).get<double>(), p.at(1).get<double>()});
  return out;
}

}  // namespace

nlohmann::json toJson(const ProbeResult& r) {
  nlohmann::json j;
  j["point_to_point"] = {{"alpha_s", r.pointToPoint.alphaS},
                         {"bytes_per_s", r.pointToPoint.bytesPerS},
                         {"samples", samplesJson(r.pointToPointSamples)}};
  j["collectives"] = nlohmann::json::object();
  for (const auto& c : r.collectives)
    j["collectives"][c.name] = {{"ranks", c.ranks}, {"ranks_per_host", c.ranksPerHost},
                                {"alpha_s", c.fit.alphaS}, {"bytes_per_s", c.fit.bytesPerS},
                                {"samples", samplesJson(c.samples)}};
  return j;
}

ProbeResult probeFromJson(const nlohmann::json& j) {
  ProbeResult r;
  const auto& p = j.at("point_to_point");
  r.pointToPoint = {p.at("alpha_s").get<double>(), p.at("bytes_per_s").get<double>()};
  r.pointToPointSamples = samplesFrom(p.at("samples"));
  for (const auto& [name, c] : j.at("collectives").items())
    r.collectives.push_back({name, c.at("ranks").get<int>(), c.at("ranks_per_host").get<int>(),
                             {c.at("alpha_s").get<double>(), c.at("bytes_per_s").get<double>()},
                             samplesFrom(c.at("samples"))});
  return r;
}

}  // namespace dtrain::calibrate
