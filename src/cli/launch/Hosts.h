#pragma once
// The hosts of a launch: parsed from --netsim N, --hosts or --hostfile, and
// probed for an answer (a lost host does not answer; with --rejoin a dropped
// one that answers again is taken back).
#include <string>
#include <vector>

#include "cli/launch/Flags.h"

namespace dtrain::cli::launch {

struct LaunchHost {
  std::string name;  // netsim: the host number
  int slots = 1;
};

// Exactly one of --netsim, --hosts, --hostfile; bad entries throw UsageError.
std::vector<LaunchHost> parseHosts(const LaunchFlags& f);
// "0,1,2": the names, comma-separated.
std::string hostList(const std::vector<LaunchHost>& hosts);
int64_t workersOf(const std::vector<LaunchHost>& hosts);

// Asks hosts whether they answer. Emulated hosts (netsim non-empty: the path of
// scripts/netsim.sh): `netsim.sh probe I`, a TCP connection from the host's
// namespace over its link to the bridge (refused = the link carries packets);
// real hosts: `ssh -o BatchMode=yes -o ConnectTimeout=10 HOST true`.
class HostProbe {
 public:
  explicit HostProbe(std::string netsim) : netsim_(std::move(netsim)) {}
  bool answers(const LaunchHost& h) const;
  // Ends whatever of a failed job is left on a host (emulated hosts:
  // `netsim.sh kill I`, every process in its namespace, e.g. the ranks and
  // daemon behind a link that went down). Real hosts: nothing (mpirun's
  // daemons end their ranks when they can reach them).
  void endLeftovers(const LaunchHost& h) const;

 private:
  std::string netsim_;
};

}  // namespace dtrain::cli::launch
