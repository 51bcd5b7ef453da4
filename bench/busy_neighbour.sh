#!/bin/bash
# The default thread count beside a busy process (issue 61): lenet (synthetic
# images) and a small .npy mlp, each at the default (--threads auto, dtrain's
# passive OpenMP wait), the old default (libgomp's own spinning: GOMP_SPINCOUNT
# 300000, what an unset policy gave), --threads 1 and --threads 2, with one
# busy process per the NEIGHBOURS cores (default 1: a shell loop pinned to core
# 0) and, with QUIET=1, also alone. Alternating rounds; prints each row's
# samples/s per round, then the medians and each row's ratio to the best fixed
# --threads of the same model and neighbour count.
# Usage: [NEIGHBOURS=1] [QUIET=1] bash bench/busy_neighbour.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
out=$(mktemp -d /tmp/bench-busy-XXXXXX)
/usr/bin/python3 -c "
import numpy as np
rng = np.random.default_rng(0)
x = rng.normal(size=(8192, 32)).astype('f4'); y = (x[:, 0] > 0).astype('i8')
np.save('$out/x.npy', x); np.save('$out/y.npy', y)"
declare -A model_args=(
  [lenet]="--model lenet --dataset synthetic --synthetic-size 8192 --max-steps 60"
  [mlp]="--model mlp --dataset npy --train-data $out/x.npy --train-labels $out/y.npy --max-steps 300")
rows=("default|" "spinning|GOMP_SPINCOUNT=300000" "t1|--threads 1" "t2|--threads 2")
busy=()
start_neighbours() {
  for ((i = 0; i < $1; i++)); do
    taskset -c "$i" bash -c 'while :; do :; done' &
    busy+=($!)
  done
}
stop_neighbours() {
  for p in "${busy[@]}"; do kill "$p" 2>/dev/null || true; done
  busy=()
}
trap stop_neighbours EXIT
lscpu | grep -E "Model name|^CPU\(s\)" || true
uptime
settings=("${NEIGHBOURS:-1}")
[ -n "${QUIET:-}" ] && settings=(0 "${settings[@]}")
for r in $(seq 1 "$rounds"); do
  for n in "${settings[@]}"; do
    start_neighbours "$n"
    for model in lenet mlp; do
      for row in "${rows[@]}"; do
        name=${row%%|*}; extra=${row#*|}
        envs=(); flags=()
        case "$extra" in *=*) envs=("$extra") ;; ?*) flags=($extra) ;; esac
        env -u OMP_NUM_THREADS -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT "${envs[@]}" build/dtrain train \
          ${model_args[$model]} --progress off "${flags[@]}" 2>/dev/null | tail -1 |
          /usr/bin/python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print('$r $n $model $name', round(d['samples_per_s'], 1), d['threads'])" |
          tee -a "$out/rows.txt"
      done
    done
    stop_neighbours
  done
done
uptime
/usr/bin/python3 - "$out/rows.txt" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    r, n, model, name, rate, threads = line.split()
    runs.setdefault((int(n), model), {}).setdefault(name, []).append(float(rate))
for (n, model), by in sorted(runs.items()):
    med = {k: statistics.median(v) for k, v in by.items()}
    best = max(med.get("t1", 0), med.get("t2", 0))
    for name, m in med.items():
        spread = max(by[name]) / max(min(by[name]), 1e-9)
        print(f"neighbours={n} {model:5s} {name:8s} median {m:10.1f} samples/s  "
              f"{m / best:5.2f}x of the best fixed --threads  (max/min over rounds {spread:.2f})")
PY
