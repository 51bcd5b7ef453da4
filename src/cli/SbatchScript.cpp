#include "cli/SbatchScript.h"

#include <functional>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace dtrain::cli {

namespace {

// A line of the template that the plan's script has in its own form: found by
// its start, written by `write`. Each must be found exactly once.
struct Replacement {
  std::string_view start;
  std::function<void(std::ostream&)> write;
  int found = 0;
};

void writeConfig(std::ostream& s, const SbatchJob& job) {
  s << "mkdir -p \"$ckpt\"\n"
    << "cat > \"$ckpt/plan.toml\" <<'DTRAIN_PLAN_TOML'\n"
    << job.configToml << (job.configToml.empty() || job.configToml.back() == '\n' ? "" : "\n")
    << "DTRAIN_PLAN_TOML\n"
    << "config=(--config \"$ckpt/plan.toml\")  # the plan's configuration; flags after sbatch THIS_FILE add to it\n";
}

std::vector<Replacement> replacements(const SbatchJob& job) {
  const auto line = [](std::string text) {
    return [text = std::move(text)](std::ostream& s) { s << text << "\n"; };
  };
  return {
      {"#SBATCH --nodes=", line("#SBATCH --nodes=" + std::to_string(job.nodes))},
      {"#SBATCH --ntasks-per-node=", line("#SBATCH --ntasks-per-node=" + std::to_string(job.tasksPerNode))},
      {"#SBATCH --cpus-per-task=", line("#SBATCH --cpus-per-task=" + std::to_string(job.cpusPerTask))},
      {"mpi=", line(job.mpi ? "mpi=1  # the ranks are mpirun's processes"
                            : "mpi=0  # one process whose ranks are threads (the plan chose --backend local)")},
      {"config=(", [&job](std::ostream& s) { writeConfig(s, job); }},
  };
}

}  // namespace

std::string sbatchScript(const SbatchJob& job) {
  std::istringstream in{std::string(sbatchTemplate())};
  std::ostringstream s;
  std::vector<Replacement> own = replacements(job);
  std::string text;
  bool header = true;  // the example's comments before its #SBATCH lines: this script has its own
  std::getline(in, text);
  s << text << "\n"
    << "# Written by dtrain plan: " << job.summary << ".\n"
    << "#   sbatch THIS_FILE [more dtrain train flags]   (docs/guide/slurm.md)\n"
    << "# It is examples/slurm/train.sbatch (read it for what the run does on SIGUSR1,\n"
    << "# SIGTERM and a lost node) with the plan's counts and configuration.\n";
  while (std::getline(in, text)) {
    if (header && text.rfind("#SBATCH", 0) != 0) continue;
    header = false;
    Replacement* r = nullptr;
    for (Replacement& c : own)
      if (text.rfind(c.start, 0) == 0) r = &c;
    if (r) {
      r->write(s);
      ++r->found;
    } else {
      s << text << "\n";
    }
  }
  for (const Replacement& r : own)
    if (r.found != 1)  // the example changed under this code: the slurm and cli tests say so
      throw std::logic_error("examples/slurm/train.sbatch has " + std::to_string(r.found) +
                             " lines starting '" + std::string(r.start) + "', not one");
  return s.str();
}

}  // namespace dtrain::cli
