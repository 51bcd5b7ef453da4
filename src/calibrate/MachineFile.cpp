#include "calibrate/MachineFile.h"

#include <cmath>
#include <set>

#include "core/Error.h"
#include "runtime/AtomicFile.h"

namespace dtrain::calibrate {

nlohmann::json linkJson(const AlphaBeta& fit) {
  return {{"alpha_s", fit.alphaS}, {"bytes_per_s", fit.bytesPerS}};
}

nlohmann::json computeJson(const ComputeRates& r) {
  return {{"flops_per_s", {{"fp32", r.fp32FlopsPerS}, {"bf16", r.bf16FlopsPerS}}},
          {"memory_bytes_per_s", r.memoryBytesPerS}};
}

nlohmann::json modelTimesJson(const ModelTimes& t) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : t.layers)
    layers.push_back({{"name", l.name}, {"params", l.params}, {"forward_s", l.forwardS},
                      {"backward_s", l.backwardS}, {"activation_bytes", l.activationBytes}});
  return {{"forward_s", t.forwardS}, {"backward_s", t.backwardS}, {"update_s", t.updateS},
          {"layers", layers}};
}

nlohmann::json collectivesJson(const ProbeResult& probe) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& c : probe.collectives)
    // The measurements too: the simulator reads a size between two of them off them.
    j[c.name] = {{"ranks", c.ranks}, {"ranks_per_host", c.ranksPerHost}, {"alpha_s", c.fit.alphaS},
                 {"bytes_per_s", c.fit.bytesPerS}, {"samples", samplesJson(c.samples)}};
  return j;
}

namespace {

const nlohmann::json& need(const nlohmann::json& j, const std::string& path, const std::string& key) {
  DTRAIN_CHECK(j.is_object() && j.contains(key), "machine file: missing ", path, key);
  return j.at(key);
}

void positive(const nlohmann::json& j, const std::string& path, const std::string& key,
              bool zeroOk = false) {
  const auto& v = need(j, path, key);
  const bool ok = v.is_number() && std::isfinite(v.get<double>()) &&
                  (zeroOk ? v.get<double>() >= 0 : v.get<double>() > 0);
  DTRAIN_CHECK(ok, "machine file: ", path, key, " must be a ", zeroOk ? "non-negative" : "positive",
               " finite number, not ", v.dump());
}

void checkFit(const nlohmann::json& j, const std::string& path) {
  positive(j, path, "alpha_s");
  positive(j, path, "bytes_per_s");
}

}  // namespace

void checkMachineJson(const nlohmann::json& m) {
  DTRAIN_CHECK(m.is_object(), "machine file: not a JSON object");
  static const std::set<std::string> topLevel = {
      "format", "name", "hosts", "devices_per_host", "memory_per_device_bytes",
      "shared_cores", "paired_sum_waits", "async_sends", "compute", "links", "collectives", "models"};
  for (const auto& [key, value] : m.items())
    DTRAIN_CHECK(topLevel.count(key), "machine file: unknown key '", key, "'");
  DTRAIN_CHECK(need(m, "", "format") == kMachineFormat, "machine file: format must be '",
               kMachineFormat, "'");
  DTRAIN_CHECK(need(m, "", "name").is_string(), "machine file: name must be a string");
  positive(m, "", "hosts");
  positive(m, "", "devices_per_host");
  positive(m, "", "memory_per_device_bytes");
  if (m.contains("shared_cores")) positive(m, "", "shared_cores");
  if (m.contains("paired_sum_waits")) {
    DTRAIN_CHECK(m.at("paired_sum_waits").is_array(), "machine file: paired_sum_waits must be an array");
    for (const auto& w : m.at("paired_sum_waits")) {
      positive(w, "paired_sum_waits[].", "ranks_per_core");
      positive(w, "paired_sum_waits[].", "seconds", true);
    }
  }
  const auto& compute = need(m, "", "compute");
  const auto& flops = need(compute, "compute.", "flops_per_s");
  positive(flops, "compute.flops_per_s.", "fp32");
  for (const auto& [p, v] : flops.items()) positive(flops, "compute.flops_per_s.", p);
  positive(compute, "compute.", "memory_bytes_per_s");
  static const std::set<std::string> linkKinds = {"same_process", "intra_host", "inter_host"};
  const auto& links = need(m, "", "links");
  need(links, "links.", "same_process");
  for (const auto& [kind, fit] : links.items()) {
    DTRAIN_CHECK(linkKinds.count(kind), "machine file: unknown link kind 'links.", kind, "'");
    checkFit(fit, "links." + kind + ".");
    if (fit.contains("burst_bytes")) positive(fit, "links." + kind + ".", "burst_bytes", true);
    if (fit.contains("core_s_per_byte")) positive(fit, "links." + kind + ".", "core_s_per_byte", true);
  }
  if (m.contains("collectives"))
    for (const auto& [kind, entries] : m.at("collectives").items())
      for (const auto& [name, c] : entries.items()) {
        DTRAIN_CHECK(linkKinds.count(kind) || kind == "inter_host_shared", "machine file: unknown link kind 'collectives.",
                     kind, "'");
        const std::string path = "collectives." + kind + "." + name + ".";
        checkFit(c, path);
        positive(c, path, "ranks");
        positive(c, path, "ranks_per_host");
        // (plan::readMachine checks each pair)
        if (c.contains("samples")) DTRAIN_CHECK(c.at("samples").is_array(), "machine file: ", path, "samples must be an array");
      }
  if (!m.contains("models")) return;
  for (const auto& [model, entry] : m.at("models").items()) {
    const std::string base = "models." + model + ".";
    need(entry, base, "precision");
    positive(entry, base, "threads");
    if (entry.contains("shared_slowdown")) positive(entry, base, "shared_slowdown");
    if (entry.contains("waiting_slowdown")) positive(entry, base, "waiting_slowdown");
    for (const auto& [mb, t] : need(entry, base, "micro_batches").items()) {
      const std::string path = base + "micro_batches." + mb + ".";
      positive(t, path, "forward_s");
      positive(t, path, "backward_s");
      positive(t, path, "update_s");
      const auto& layers = need(t, path, "layers");
      DTRAIN_CHECK(layers.is_array() && !layers.empty(), "machine file: ", path, "layers is empty");
      for (size_t i = 0; i < layers.size(); ++i) {
        const std::string lp = path + "layers[" + std::to_string(i) + "].";
        DTRAIN_CHECK(need(layers[i], lp, "name").is_string(), "machine file: ", lp, "name");
        positive(layers[i], lp, "params", true);
        positive(layers[i], lp, "forward_s", true);
        positive(layers[i], lp, "backward_s", true);
        positive(layers[i], lp, "activation_bytes", true);
      }
    }
  }
}

void writeMachineFile(const nlohmann::json& machine, const std::string& path) {
  checkMachineJson(machine);
  const std::string text = machine.dump(1) + "\n";
  runtime::AtomicFile file(path, "writing machine file");
  file.write(text.data(), text.size());
  file.commit();
}

}  // namespace dtrain::calibrate
