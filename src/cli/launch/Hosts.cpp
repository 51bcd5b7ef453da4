#include "cli/launch/Hosts.h"

#include <fstream>
#include <sstream>

#include "cli/launch/Process.h"
#include "core/Error.h"

namespace dtrain::cli::launch {

std::vector<LaunchHost> parseHosts(const LaunchFlags& f) {
  std::vector<LaunchHost> hosts;
  const int given = (f.netsim > 0) + !f.hosts.empty() + !f.hostfile.empty();
  DTRAIN_CHECK_USAGE(given == 1, "launch needs exactly one of --netsim N, --hosts H1:R,H2:R,... or --hostfile F");
  auto add = [&](const std::string& spec) {
    LaunchHost h;
    const auto colon = spec.find(':');
    h.name = spec.substr(0, colon);
    h.slots = f.ranksPerHost;
    if (colon != std::string::npos) {
      try {
        h.slots = std::stoi(spec.substr(colon + 1));
      } catch (const std::logic_error&) {
        h.slots = 0;
      }
    }
    DTRAIN_CHECK_USAGE(!h.name.empty() && h.slots >= 1, "launch: bad host '", spec, "' (use NAME or NAME:RANKS)");
    hosts.push_back(h);
  };
  if (f.netsim > 0) {
    for (int i = 0; i < f.netsim; ++i) add(std::to_string(i));
  } else if (!f.hosts.empty()) {
    std::stringstream ss(f.hosts);
    for (std::string spec; std::getline(ss, spec, ',');) add(spec);
  } else {
    std::ifstream in(f.hostfile);
    DTRAIN_CHECK_USAGE(in.good(), "launch: cannot read --hostfile ", f.hostfile);
    // OpenMPI's format: "name [slots=N]" per line, # comments.
    for (std::string line; std::getline(in, line);) {
      line = line.substr(0, line.find('#'));
      std::stringstream ls(line);
      std::string name, slots;
      if (!(ls >> name)) continue;
      ls >> slots;
      add(slots.rfind("slots=", 0) == 0 ? name + ":" + slots.substr(6) : name);
    }
  }
  DTRAIN_CHECK_USAGE(!hosts.empty(), "launch: no hosts given");
  return hosts;
}

std::string hostList(const std::vector<LaunchHost>& hosts) {
  std::string s;
  for (const auto& h : hosts) s += (s.empty() ? "" : ",") + h.name;
  return s;
}

int64_t workersOf(const std::vector<LaunchHost>& hosts) {
  int64_t w = 0;
  for (const auto& h : hosts) w += h.slots;
  return w;
}

bool HostProbe::answers(const LaunchHost& h) const {
  const int rc = !netsim_.empty()
                     ? runToStderr({"bash", netsim_, "probe", h.name}, true)
                     : runToStderr({"ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", h.name, "true"}, true);
  return rc == 0;
}

void HostProbe::endLeftovers(const LaunchHost& h) const {
  if (!netsim_.empty()) runToStderr({"bash", netsim_, "kill", h.name}, true);
}


}  // namespace dtrain::cli::launch
