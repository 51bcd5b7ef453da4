#include "cli/LaunchCommand.h"

#include <memory>

#include "cli/launch/Flags.h"
#include "cli/launch/Launcher.h"

// The flags only: the launch itself lives in cli/launch/ (Launcher: the
// watch/restart loop; Attempt: one mpirun; Hosts: the host list and probes;
// TrainArgs: the train arguments and the global batch; MembershipLog: the
// records and the final line).
namespace dtrain::cli {

void addLaunchCommand(CLI::App& app) {
  auto f = std::make_shared<launch::LaunchFlags>();
  CLI::App* sub = app.add_subcommand(
      "launch", "Elastic run across hosts: train under mpirun, restart without a lost host from the newest checkpoint");
  sub->add_option("--netsim", f->netsim, "N emulated hosts (scripts/netsim.sh; brought up and down by this run)")
      ->check(CLI::Range(1, 200));
  sub->add_option("--rate", f->rate, "With --netsim: link rate of each emulated host (e.g. 100mbit, 1gbit)");
  sub->add_option("--hosts", f->hosts, "Real hosts: H1[:RANKS],H2[:RANKS],... (mpirun --host)");
  sub->add_option("--hostfile", f->hostfile, "Real hosts: an OpenMPI hostfile (NAME [slots=N] per line)");
  sub->add_option("--min-hosts", f->minHosts, "Fewest hosts to go on with (else exit 1)");
  sub->add_option("--max-restarts", f->maxRestarts, "Restarts before giving up");
  sub->add_option("--ranks-per-host", f->ranksPerHost, "Ranks on each host (where a host names no count)");
  sub->add_flag("--rejoin", f->rejoin,
                "Take a dropped host back when it answers again (probed while the job runs; the job "
                "stops with a checkpoint and starts again with it)");
  sub->add_option("--rejoin-probe", f->rejoinProbeS, "With --rejoin: seconds between probes of dropped hosts");
  sub->add_option("train", f->train, "-- train ARGS...: the train run (needs --checkpoint-dir and --checkpoint-every)");
  sub->callback([f] { launch::runLaunch(*f); });
}

}  // namespace dtrain::cli
