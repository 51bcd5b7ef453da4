#include "cli/SbatchScript.h"

#include <sstream>

namespace dtrain::cli {

namespace {

// The part after the configuration, as in examples/slurm/train.sbatch (keep
// the two in step: the slurm CTest runs both). $launch is "mpirun" or empty.
constexpr const char* kRun = R"(
# SIGUSR1 (the time limit is near, or `scancel --batch --signal=USR1 JOBID`)
# reaches this script only: pass it on to the ranks (mpirun forwards USR1), which
# finish their step, write one checkpoint and exit 138; then requeue the job,
# whose next run goes on from that checkpoint.
preempted=0
trap 'preempted=1; kill -USR1 "$run" 2>/dev/null' USR1
$launch "$dtrain" train --config "$config" --checkpoint-dir "$ckpt" --resume auto "$@" &
run=$!
# wait returns early (> 128) when the trapped signal comes: wait until the run is gone.
while :; do
  wait "$run"
  rc=$?
  kill -0 "$run" 2>/dev/null || break
done
if ((preempted && rc == 138)); then
  echo "dtrain: preempted (SIGUSR1): requeueing job $SLURM_JOB_ID"
  scontrol requeue "$SLURM_JOB_ID"
fi
exit "$rc"
)";

}  // namespace

std::string sbatchScript(const SbatchJob& job) {
  std::ostringstream s;
  s << "#!/bin/bash\n"
    << "# Written by dtrain plan: " << job.summary << ".\n"
    << "#   sbatch THIS_FILE [more dtrain train flags]   (docs/guide/slurm.md)\n"
    << "#SBATCH --job-name=dtrain\n"
    << "#SBATCH --nodes=" << job.nodes << "\n"
    << "#SBATCH --ntasks-per-node=" << job.tasksPerNode << "\n"
    << "#SBATCH --cpus-per-task=" << job.cpusPerTask << "\n"
    << "#SBATCH --time=01:00:00\n"
    << "#SBATCH --signal=B:USR1@60\n"
    << "#SBATCH --requeue\n"
    << "#SBATCH --open-mode=append\n"
    << "#SBATCH --output=dtrain-%j.out\n"
    << "set -u\n"
    << "dtrain=\"${DTRAIN:-$(command -v dtrain || echo \"$SLURM_SUBMIT_DIR/build/dtrain\")}\"\n"
    << "ckpt=\"${DTRAIN_CHECKPOINT_DIR:-$SLURM_SUBMIT_DIR/dtrain-ckpt-$SLURM_JOB_ID}\"\n"
    << "launch=" << (job.mpi ? "mpirun" : "") << "\n"
    << "mkdir -p \"$ckpt\"\n"
    << "config=\"$ckpt/plan.toml\"\n"
    << "cat > \"$config\" <<'DTRAIN_PLAN_TOML'\n"
    << job.configToml << (job.configToml.empty() || job.configToml.back() == '\n' ? "" : "\n")
    << "DTRAIN_PLAN_TOML\n"
    << kRun;
  return s.str();
}

}  // namespace dtrain::cli
