#!/bin/bash
# Throughput under SLURM against plain mpirun on the same emulated hosts (issue 56):
# the same job (mlp, synthetic data, 2 hosts x 2 ranks, 1 thread each) submitted
# with sbatch (examples/slurm/train.sbatch: mpirun inside the allocation) and run
# by scripts/netsim.sh mpirun, alternating, ROUNDS rounds; prints each run's
# samples/s, then the medians and sbatch's ratio to mpirun. Root; brings a
# 2-node cluster up (scripts/slurm.sh) and down.
# The emulated nodes share this machine's cores, which mpirun inside a job cannot
# tell (it binds ranks to cores, uses shared memory, lets idle ranks spin), so the
# sbatch runs get netsim.sh mpirun's settings (docs/guide/slurm.md); AS_IS=1 runs
# the example script as a user on a real cluster would.
# Usage: [AS_IS=1] bash bench/slurm_vs_mpirun.sh [ROUNDS] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3} steps=${2:-300}
dtrain="$PWD/build/dtrain"
work=$(mktemp -d /var/tmp/bench-slurm-XXXXXX)  # not /tmp: each node has its own
trap 'bash scripts/slurm.sh down >/dev/null 2>&1; rm -rf "$work"' EXIT
bash scripts/slurm.sh up 2 --cpus-per-node 2 >/dev/null
eval "$(bash scripts/slurm.sh env)"
export SLURM_CONF DTRAIN="$dtrain" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
train=(--model mlp --dataset synthetic --synthetic-size 8192 --batch-size 64 --max-steps "$steps"
       --seed 1 --progress off --threads 1)
rate() { grep '^{' "$1" | tail -n 1 | grep -o '"samples_per_s":[0-9.e+-]*' | cut -d: -f2; }

if [[ "${AS_IS:-0}" != 1 ]]; then
  export OMP_NUM_THREADS=1 OMPI_MCA_hwloc_base_binding_policy=none OMPI_MCA_btl=tcp,self \
    OMPI_MCA_mpi_yield_when_idle=1  # sbatch passes the environment on
fi

run_sbatch() {
  local id
  # A checkpoint directory of its own: job ids start again at 1 on every new cluster, and
  # the example's default directory (by job id) would resume an earlier run's finished one.
  id=$(DTRAIN_CHECKPOINT_DIR="$work/ckpt-$1" sbatch --parsable --wait --nodes 2 --ntasks-per-node 2 --cpus-per-task 1 \
       --output "$work/s$1.out" examples/slurm/train.sbatch "${train[@]}") >/dev/null
  rate "$work/s$1.out"
}
run_mpirun() {
  bash scripts/netsim.sh mpirun -np 4 --ranks-per-host 2 -- \
    "$dtrain" train --backend mpi "${train[@]}" > "$work/m$1.out" 2>/dev/null
  rate "$work/m$1.out"
}

sb=() mp=()
for ((r = 1; r <= rounds; r++)); do
  # Alternate which goes first, so a drift in the machine's load falls on both.
  if ((r % 2)); then sb+=("$(run_sbatch $r)"); mp+=("$(run_mpirun $r)")
  else mp+=("$(run_mpirun $r)"); sb+=("$(run_sbatch $r)"); fi
  echo "round $r: sbatch ${sb[-1]} samples/s, mpirun ${mp[-1]} samples/s"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
ms=$(median "${sb[@]}") mm=$(median "${mp[@]}")
echo "median: sbatch $ms samples/s, mpirun $mm samples/s, sbatch/mpirun $(awk -v a="$ms" -v b="$mm" 'BEGIN{printf "%.3f", a/b}')"
