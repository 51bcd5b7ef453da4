// [ps] (parameter servers and their fault injection) and [faults] (stragglers, every strategy).
#include <map>
#include <sstream>
#include <type_traits>

#include "api/Schema.h"
#include "api/groups/Conditions.h"
#include "core/Error.h"

namespace dtrain::api {

using runtime::TrainConfig;

namespace {

// "INDEX:VALUE" entries (--straggler 1:20) as a map field of the TrainConfig.
template <typename V>
Option& indexValueList(Option& o, std::map<int, V> TrainConfig::*field, const char* unit) {
  o.kind = Kind::StringList;
  o.repeatable = true;
  o.set = [field, unit](RunConfig& rc, const Value& v) {
    auto& map = rc.train.*field;
    map.clear();
    for (const auto& text : std::get<std::vector<std::string>>(v)) {
      const auto colon = text.find(':');
      bool ok = false;
      try {
        if (colon != std::string::npos && colon > 0 && colon + 1 < text.size()) {
          size_t used1 = 0, used2 = 0;
          const int index = std::stoi(text.substr(0, colon), &used1);
          const std::string rest = text.substr(colon + 1);
          V value;
          if constexpr (std::is_floating_point_v<V>) value = std::stod(rest, &used2);
          else value = std::stoll(rest, &used2);
          ok = used1 == colon && used2 == rest.size();
          if (ok) map[index] = value;
        }
      } catch (const std::exception&) {
      }
      DTRAIN_CHECK_USAGE(ok, text, ": expected INDEX:", unit, " (e.g. 3:20)");
    }
  };
  o.get = [field](const RunConfig& rc) -> std::optional<Value> {
    const auto& map = rc.train.*field;
    if (map.empty()) return std::nullopt;
    std::vector<std::string> out;
    for (const auto& [index, value] : map) {
      std::ostringstream os;
      os << index << ':' << value;
      out.push_back(os.str());
    }
    return Value(out);
  };
  return o;
}

std::function<std::string(const RunConfig&)> forConsistency(std::vector<std::string> modes,
                                                            std::string why) {
  return [modes, why](const RunConfig& rc) -> std::string {
    for (const auto& m : modes)
      if (rc.train.consistency == m) return "";
    return why;
  };
}

}  // namespace

void addPsOptions(Schema& s) {
  s.addGroup("ps", "Parameter servers");
  s.add("ps", "servers", "--servers", "Server ranks (local: threads; mpi: the first S of -np)")
      .train(&TrainConfig::servers).range(1, 4096).result("servers");
  s.add("ps", "consistency", "--consistency", "sync (BSP), async (Downpour) or ssp")
      .train(&TrainConfig::consistency).oneOf({"sync", "async", "ssp"}).result("consistency");
  s.add("ps", "staleness", "--staleness", "ssp: steps a worker may run ahead of the slowest")
      .train(&TrainConfig::staleness).range(0).result("staleness")
      .when(forConsistency({"ssp"}, "applies to --consistency ssp"));
  s.add("ps", "backup_workers", "--backup-workers",
        "sync: each step uses the first W-b gradients and drops the b late ones")
      .train(&TrainConfig::backupWorkers).range(0).result("backup_workers")
      .when(forConsistency({"sync"}, "applies to --consistency sync"));
  s.add("ps", "push_every", "--push-every", "async: steps of gradients accumulated per push")
      .train(&TrainConfig::pushEvery).range(1).result("push_every")
      .when(forConsistency({"async"}, "applies to --consistency async"));
  s.add("ps", "fetch_every", "--fetch-every", "async, ssp eager: steps between parameter fetches")
      .train(&TrainConfig::fetchEvery).range(1).result("fetch_every")
      .when([](const RunConfig& rc) {
        const auto& c = rc.train;
        return unlessThen(c.consistency == "async" || (c.consistency == "ssp" && c.sspReads == "eager"),
                          "applies to --consistency async and ssp with --ssp-reads eager");
      });
  s.add("ps", "ssp_reads", "--ssp-reads",
        "ssp: eager (fetch every --fetch-every steps, block only past the bound) or lazy (fetch "
        "only when the cache is too stale)")
      .train(&TrainConfig::sspReads).oneOf({"eager", "lazy"}).result("ssp_reads")
      .when(forConsistency({"ssp"}, "applies to --consistency ssp"));
  s.add("ps", "timeout", "--ps-timeout",
        "Seconds without a message or heartbeat after which a peer is declared dead")
      .train(&TrainConfig::psTimeoutS).above(0);
  indexValueList(s.add("ps", "kill_worker", "--kill-worker",
                       "WORKER:STEP: that worker stops answering at STEP (fault injection)"),
                 &TrainConfig::killWorker, "N");
  indexValueList(s.add("ps", "pause_worker", "--pause-worker",
                       "WORKER:STEP: that worker goes silent at STEP until every server declared "
                       "it dead, then carries on (fault injection: re-admission)"),
                 &TrainConfig::pauseWorker, "N");
  indexValueList(s.add("ps", "kill_server", "--kill-server",
                       "SERVER:N: that server stops answering after N updates (fault injection)"),
                 &TrainConfig::killServer, "N");
}

void addFaultOptions(Schema& s) {
  s.addGroup("faults", "Stragglers (comparisons on one machine)");
  indexValueList(s.add("faults", "straggler", "--straggler",
                       "WORKER:MS: worker WORKER sleeps MS ms more every step (repeatable)"),
                 &TrainConfig::stragglerMs, "MS");
  s.add("faults", "random_delay", "--random-delay",
        "Every worker sleeps a random delay per step (exponential, mean MS ms)")
      .train(&TrainConfig::randomDelayMs).range(0);
}

}  // namespace dtrain::api
