#pragma once
// `dtrain launch`'s own flags (cli/LaunchCommand.cpp declares them to CLI11).
#include <string>
#include <vector>

namespace dtrain::cli::launch {

struct LaunchFlags {
  int netsim = 0;
  std::string rate = "1gbit";
  std::string hosts;
  std::string hostfile;
  int minHosts = 1;
  int maxRestarts = 3;
  int ranksPerHost = 1;
  bool rejoin = false;
  double rejoinProbeS = 5;          // --rejoin: how often dropped hosts are probed while the job runs
  std::vector<std::string> train;  // after `--`: train ARGS...
};

}  // namespace dtrain::cli::launch
