#include "plan/Machine.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/Error.h"

namespace dtrain::plan {

namespace {

using nlohmann::json;

// Walks one JSON object of the file: every key must be known, every value of
// the type asked; messages name the file and the key's path.
struct MachineReader {
  std::string file;

  [[noreturn]] void fail(const std::string& path, const std::string& problem) const {
    throw UsageError("machine file " + file + ": " + (path.empty() ? "" : path + ": ") + problem);
  }
  void onlyKeys(const json& obj, const std::string& path, const std::set<std::string>& known) const {
    if (!obj.is_object()) fail(path, "must be an object");
    for (const auto& [key, value] : obj.items()) {
      if (known.count(key)) continue;
      std::string names;
      for (const auto& k : known) names += (names.empty() ? "" : ", ") + k;
      fail(path.empty() ? key : path + "." + key, "unknown key (known: " + names + ")");
    }
  }
  static std::string join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }
  double number(const json& obj, const std::string& path, const std::string& key, bool positive) const {
    const std::string p = join(path, key);
    if (!obj.contains(key)) fail(p, "missing");
    const json& v = obj.at(key);
    if (!v.is_number()) fail(p, "must be a number, got " + std::string(v.type_name()));
    const double x = v.get<double>();
    if (positive && !(x > 0)) fail(p, "must be > 0, got " + v.dump());
    if (!positive && x < 0) fail(p, "must be >= 0, got " + v.dump());
    return x;
  }
  // A whole number in [1, max], checked as a double before it is converted
  // (converting one outside the integer's range is undefined behaviour: the
  // fuzzer found 1e95 bytes; tests/fuzz/corpus/machinefile/found-*).
  int64_t integer(const json& obj, const std::string& path, const std::string& key,
                  int64_t max = std::numeric_limits<int>::max()) const {
    const std::string p = join(path, key);
    if (!obj.contains(key)) fail(p, "missing");
    const json& v = obj.at(key);
    if (!v.is_number()) fail(p, "must be an integer, got " + v.dump());
    const double x = v.get<double>();
    if (!(std::isfinite(x) && x == std::floor(x))) fail(p, "must be an integer, got " + v.dump());
    if (x < 1) fail(p, "must be >= 1, got " + v.dump());
    if (x > static_cast<double>(max)) fail(p, "must be <= " + std::to_string(max) + ", got " + v.dump());
    return static_cast<int64_t>(x);
  }
  // A count of bytes or parameters given as a number (>= 0, or > 0): below 2^62.
  int64_t amount(const json& obj, const std::string& path, const std::string& key, bool positive) const {
    const double x = number(obj, path, key, positive);
    if (!(x < 0x1p62)) fail(join(path, key), "must be below 2^62, got " + obj.at(key).dump());
    return static_cast<int64_t>(x);
  }
  std::string text(const json& obj, const std::string& path, const std::string& key) const {
    const std::string p = join(path, key);
    if (!obj.contains(key)) fail(p, "missing");
    if (!obj.at(key).is_string()) fail(p, "must be a string, got " + std::string(obj.at(key).type_name()));
    return obj.at(key).get<std::string>();
  }

  LinkCost link(const json& obj, const std::string& path, bool fitKeys = false) const {
    if (fitKeys) onlyKeys(obj, path, {"ranks", "ranks_per_host", "alpha_s", "bytes_per_s", "samples"});
    else onlyKeys(obj, path, {"alpha_s", "bytes_per_s", "burst_bytes", "core_s_per_byte"});
    LinkCost l{number(obj, path, "alpha_s", false), number(obj, path, "bytes_per_s", true)};
    if (!fitKeys && obj.contains("burst_bytes")) l.burstBytes = static_cast<double>(amount(obj, path, "burst_bytes", false));
    if (!fitKeys && obj.contains("core_s_per_byte")) l.coreSPerByte = number(obj, path, "core_s_per_byte", false);
    return l;
  }

  static std::optional<LinkKind> kind(const std::string& key) {
    if (key == "same_process") return LinkKind::SameProcess;
    if (key == "intra_host") return LinkKind::IntraHost;
    if (key == "inter_host") return LinkKind::InterHost;
    if (key == "inter_host_shared") return LinkKind::InterHostShared;
    return std::nullopt;
  }
  static const std::set<std::string>& linkKeys() {
    static const std::set<std::string> k{"same_process", "intra_host", "inter_host"};
    return k;
  }

  void compute(const json& c, Machine& m) const {
    onlyKeys(c, "compute", {"flops_per_s", "memory_bytes_per_s"});
    if (!c.contains("flops_per_s")) fail("compute.flops_per_s", "missing");
    const json& f = c.at("flops_per_s");
    onlyKeys(f, "compute.flops_per_s", {"fp32", "bf16", "fp16"});
    for (const auto& [precision, v] : f.items())
      m.flopsPerS[precision] = number(f, "compute.flops_per_s", precision, true);
    if (m.flopsPerS.empty()) fail("compute.flops_per_s", "needs at least one precision (fp32, bf16, fp16)");
    m.memoryBytesPerS = number(c, "compute", "memory_bytes_per_s", true);
  }

  void collectives(const json& c, Machine& m) const {
    onlyKeys(c, "collectives", {"same_process", "intra_host", "inter_host", "inter_host_shared"});
    static const std::set<std::string> algos{"allreduce_ring", "allreduce_hier", "allreduce_rhd",
                                             "allreduce_tree", "allgather_ring",
                                             "reduce_scatter_ring", "broadcast"};
    for (const auto& [where, fits] : c.items()) {
      const std::string path = "collectives." + where;
      onlyKeys(fits, path, algos);
      for (const auto& [algo, fit] : fits.items()) {
        const std::string p = path + "." + algo;
        CollectiveFit cf;
        cf.cost = link(fit, p, true);
        cf.ranks = static_cast<int>(integer(fit, p, "ranks"));
        cf.ranksPerHost = static_cast<int>(integer(fit, p, "ranks_per_host"));
        if (fit.contains("samples")) cf.samples = samples(fit.at("samples"), p + ".samples");
        m.collectives[*kind(where)][algo] = cf;
      }
    }
  }

  // [[bytes, seconds], ...], by increasing bytes, every number > 0.
  std::vector<std::pair<double, double>> samples(const json& s, const std::string& path) const {
    if (!s.is_array()) fail(path, "must be an array of [bytes, seconds] pairs");
    std::vector<std::pair<double, double>> out;
    for (size_t i = 0; i < s.size(); ++i) {
      const std::string p = path + "[" + std::to_string(i) + "]";
      const json& pair = s[i];
      const bool ok = pair.is_array() && pair.size() == 2 && pair[0].is_number() && pair[1].is_number() &&
                      std::isfinite(pair[0].get<double>()) && std::isfinite(pair[1].get<double>()) &&
                      pair[0].get<double>() > 0 && pair[1].get<double>() > 0;
      if (!ok) fail(p, "must be [bytes, seconds], both > 0, got " + pair.dump());
      out.emplace_back(pair[0].get<double>(), pair[1].get<double>());
      if (i > 0 && !(out[i].first > out[i - 1].first)) fail(p, "sizes must increase, got " + pair.dump());
    }
    return out;
  }

  // [{"ranks_per_core": k, "seconds": s}, ...], k > 1 increasing, s >= 0.
  void pairedSumWaits(const json& ws, Machine& m) const {
    if (!ws.is_array()) fail("paired_sum_waits", "must be an array of {ranks_per_core, seconds}");
    for (size_t i = 0; i < ws.size(); ++i) {
      const std::string p = "paired_sum_waits[" + std::to_string(i) + "]";
      onlyKeys(ws[i], p, {"ranks_per_core", "seconds"});
      const double k = number(ws[i], p, "ranks_per_core", true), s = number(ws[i], p, "seconds", false);
      if (k <= 1) fail(p + ".ranks_per_core", "must be above 1 (ranks outnumbering the cores)");
      if (!m.pairedSumWaits.empty() && !(k > m.pairedSumWaits.back().first))
        fail(p + ".ranks_per_core", "must increase");
      m.pairedSumWaits.emplace_back(k, s);
    }
  }

  ModelTime modelTime(const json& t, const std::string& path) const {
    onlyKeys(t, path, {"forward_s", "backward_s", "update_s", "layers"});
    ModelTime mt{number(t, path, "forward_s", false), number(t, path, "backward_s", false),
                 number(t, path, "update_s", false), {}};
    if (!t.contains("layers")) return mt;
    if (!t.at("layers").is_array()) fail(path + ".layers", "must be an array");
    int i = 0;
    for (const json& l : t.at("layers")) {
      const std::string p = path + ".layers[" + std::to_string(i++) + "]";
      onlyKeys(l, p, {"name", "params", "forward_s", "backward_s", "activation_bytes"});
      LayerTime lt;
      lt.name = text(l, p, "name");
      lt.params = amount(l, p, "params", false);
      lt.forwardS = number(l, p, "forward_s", false);
      lt.backwardS = number(l, p, "backward_s", false);
      lt.activationBytes = amount(l, p, "activation_bytes", false);
      mt.layers.push_back(lt);
    }
    return mt;
  }

  void models(const json& ms, Machine& m) const {
    if (!ms.is_object()) fail("models", "must be an object (model name -> calibration)");
    for (const auto& [model, cal] : ms.items()) {
      const std::string path = "models." + model;
      onlyKeys(cal, path, {"precision", "threads", "optimizer", "params", "shared_slowdown", "waiting_slowdown",
                                "micro_batches"});
      ModelCalibration mc;
      if (cal.contains("precision")) mc.precision = text(cal, path, "precision");
      if (cal.contains("optimizer")) mc.optimizer = text(cal, path, "optimizer");
      if (cal.contains("params")) mc.params = integer(cal, path, "params", int64_t{1} << 53);
      if (cal.contains("threads")) mc.threads = static_cast<int>(integer(cal, path, "threads"));
      if (cal.contains("shared_slowdown")) {
        mc.sharedSlowdown = number(cal, path, "shared_slowdown", false);
        if (mc.sharedSlowdown < 1) fail(path + ".shared_slowdown", "must be at least 1 (a slowdown)");
      }
      if (cal.contains("waiting_slowdown")) {
        mc.waitingSlowdown = number(cal, path, "waiting_slowdown", false);
        if (mc.waitingSlowdown < 1) fail(path + ".waiting_slowdown", "must be at least 1 (a slowdown)");
      }
      if (!cal.contains("micro_batches") || !cal.at("micro_batches").is_object())
        fail(path + ".micro_batches", "missing (an object: micro-batch size -> times)");
      for (const auto& [size, t] : cal.at("micro_batches").items()) {
        int64_t b = 0;
        try {
          size_t used = 0;
          b = std::stoll(size, &used);
          if (used != size.size()) b = 0;
        } catch (const std::exception&) {}
        if (b < 1) fail(path + ".micro_batches." + size, "the key must be a micro-batch size (an integer >= 1)");
        mc.microBatches[b] = modelTime(t, path + ".micro_batches." + size);
      }
      m.models[model] = mc;
    }
  }

  Machine read(const json& j) const {
    onlyKeys(j, "", {"format", "name", "hosts", "devices_per_host", "memory_per_device_bytes",
                     "shared_cores", "paired_sum_waits", "async_sends", "compute", "links", "collectives", "models"});
    if (!j.contains("format")) fail("format", std::string("missing (expected \"") + kMachineFormat + "\")");
    const std::string format = text(j, "", "format");
    if (format != kMachineFormat)
      fail("format", "is \"" + format + "\", expected \"" + kMachineFormat + "\"");
    Machine m;
    if (j.contains("name")) m.name = text(j, "", "name");
    if (j.contains("hosts")) m.hosts = static_cast<int>(integer(j, "", "hosts"));
    m.devicesPerHost = static_cast<int>(integer(j, "", "devices_per_host"));
    m.memoryPerDeviceBytes = amount(j, "", "memory_per_device_bytes", true);
    if (j.contains("shared_cores")) m.sharedCores = static_cast<int>(integer(j, "", "shared_cores"));
    if (j.contains("paired_sum_waits")) pairedSumWaits(j.at("paired_sum_waits"), m);
    if (j.contains("async_sends")) {
      if (!j.at("async_sends").is_boolean()) fail("async_sends", "must be true or false, got " + j.at("async_sends").dump());
      m.asyncSends = j.at("async_sends").get<bool>();
    }
    if (!j.contains("compute")) fail("compute", "missing");
    compute(j.at("compute"), m);
    if (!j.contains("links")) fail("links", "missing");
    const json& links = j.at("links");
    onlyKeys(links, "links", linkKeys());
    for (const auto& [where, l] : links.items()) m.links[*kind(where)] = link(l, "links." + where);
    if (!m.links.count(LinkKind::InterHost) && !m.links.count(LinkKind::IntraHost))
      fail("links", "needs intra_host or inter_host");
    if (j.contains("collectives")) collectives(j.at("collectives"), m);
    if (j.contains("models")) models(j.at("models"), m);
    return m;
  }
};

}  // namespace

const char* linkKindName(LinkKind k) {
  switch (k) {
    case LinkKind::SameProcess: return "same_process";
    case LinkKind::IntraHost: return "intra_host";
    case LinkKind::InterHostShared: return "inter_host_shared";
    default: return "inter_host";
  }
}

const std::pair<const int64_t, ModelTime>* ModelCalibration::nearest(int64_t mbs) const {
  auto best = microBatches.begin();
  for (auto it = best; it != microBatches.end(); ++it)
    if (std::abs(std::log(static_cast<double>(it->first) / mbs)) <
        std::abs(std::log(static_cast<double>(best->first) / mbs)))
      best = it;
  return best == microBatches.end() ? nullptr : &*best;
}

namespace {

ModelTime scaled(const ModelTime& t, double k) {
  ModelTime out = t;
  out.forwardS *= k;
  out.backwardS *= k;
  for (LayerTime& l : out.layers) l.forwardS *= k, l.backwardS *= k;
  return out;
}

// a + w (b - a), layer by layer (matched by name; a layer b lacks keeps a's).
ModelTime between(const ModelTime& a, const ModelTime& b, double w) {
  ModelTime out = a;
  out.forwardS += w * (b.forwardS - a.forwardS);
  out.backwardS += w * (b.backwardS - a.backwardS);
  out.updateS += w * (b.updateS - a.updateS);
  for (LayerTime& l : out.layers)
    for (const LayerTime& o : b.layers)
      if (o.name == l.name) {
        l.forwardS += w * (o.forwardS - l.forwardS);
        l.backwardS += w * (o.backwardS - l.backwardS);
        break;
      }
  return out;
}

}  // namespace

std::optional<ModelTime> ModelCalibration::at(int64_t mbs) const {
  if (microBatches.empty()) return std::nullopt;
  if (auto it = microBatches.find(mbs); it != microBatches.end()) return it->second;
  auto above = microBatches.upper_bound(mbs);
  if (above == microBatches.begin() || above == microBatches.end()) {
    const auto* n = nearest(mbs);
    ModelTime t = scaled(n->second, static_cast<double>(mbs) / static_cast<double>(n->first));
    t.updateS = n->second.updateS;  // the update is per step, not per sample
    return t;
  }
  const auto below = std::prev(above);
  const double w = static_cast<double>(mbs - below->first) / static_cast<double>(above->first - below->first);
  return between(below->second, above->second, w);
}

double Machine::flops(const std::string& precision) const {
  if (auto it = flopsPerS.find(precision); it != flopsPerS.end()) return it->second;
  if (auto it = flopsPerS.find("fp32"); it != flopsPerS.end()) return it->second;
  return flopsPerS.begin()->second;
}

const LinkCost& Machine::link(LinkKind k) const {
  if (k == LinkKind::InterHostShared) k = LinkKind::InterHost;
  // A file without same_process uses intra_host for it, one without
  // intra_host (a single-device host) inter_host, and the reverse.
  static const LinkKind order[] = {LinkKind::SameProcess, LinkKind::IntraHost, LinkKind::InterHost};
  for (int i = static_cast<int>(k); i < 3; ++i)
    if (auto it = links.find(order[i]); it != links.end()) return it->second;
  for (int i = static_cast<int>(k); i >= 0; --i)
    if (auto it = links.find(order[i]); it != links.end()) return it->second;
  throw UsageError("machine file: no link described");
}

double CollectiveFit::time(double bytes) const {
  // Between two measured sizes: the straight line between them. Above them: the
  // fit. Below: the fit's slope through the smallest, down to the fit's latency.
  const auto above = std::lower_bound(samples.begin(), samples.end(), bytes,
                                      [](const auto& s, double b) { return s.first < b; });
  if (above == samples.end()) return cost.time(bytes);
  if (above == samples.begin() && above->first > bytes)
    return std::max(cost.alphaS, above->second - (above->first - bytes) / cost.bytesPerS);
  if (above->first == bytes) return above->second;
  const auto below = above - 1;
  const double f = (bytes - below->first) / (above->first - below->first);
  return below->second + f * (above->second - below->second);
}

const CollectiveFit* Machine::collective(LinkKind k, const std::string& algo) const {
  auto it = collectives.find(k);
  if (it == collectives.end()) return nullptr;
  auto a = it->second.find(algo);
  return a == it->second.end() ? nullptr : &a->second;
}

Machine parseMachine(const std::string& text, const std::string& name) {
  json j;
  try {
    j = json::parse(text, nullptr, true, /*ignore_comments=*/true);
  } catch (const json::parse_error& e) {
    throw UsageError("machine file " + name + ": not JSON (" + e.what() + ")");
  }
  return MachineReader{name}.read(j);
}

double Machine::pairedSumWaitS(double ranksPerCore) const {
  if (ranksPerCore <= 1 || pairedSumWaits.empty()) return 0;
  // From none at 1 a core (each rank has its own) through the measured
  // points; beyond the last on the line through the last two.
  std::vector<std::pair<double, double>> points{{1.0, 0.0}};
  points.insert(points.end(), pairedSumWaits.begin(), pairedSumWaits.end());
  size_t i = 1;
  while (i + 1 < points.size() && ranksPerCore > points[i].first) ++i;
  const auto [k0, s0] = points[i - 1];
  const auto [k1, s1] = points[i];
  return std::max(0.0, s0 + (s1 - s0) * (ranksPerCore - k0) / (k1 - k0));
}

double oversubscribedShare(double share, double slowdown) {
  if (share <= 1) return share;
  return share * (1 + (slowdown - 1) * std::min(1.0, share - 1));
}

double waitingWeight(double waitingSlowdown, double sharedSlowdown) {
  if (waitingSlowdown <= 1) return 0;
  if (waitingSlowdown >= oversubscribedShare(2, sharedSlowdown)) return 1;
  double lo = 0, hi = 1;  // oversubscribedShare rises with the share: bisect
  for (int i = 0; i < 50; ++i) {
    const double mid = (lo + hi) / 2;
    (oversubscribedShare(1 + mid, sharedSlowdown) < waitingSlowdown ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

Machine readMachine(const std::string& path) {
  std::ifstream in(path);
  DTRAIN_CHECK_USAGE(in.good(), "machine file ", path, ": cannot be read (missing?)");
  std::stringstream text;
  text << in.rdbuf();
  return parseMachine(text.str(), path);
}

}  // namespace dtrain::plan
