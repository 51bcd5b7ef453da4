#!/bin/bash
# Pack vs spread for dp 2 x tp 2 across 2 emulated hosts (docs/PERFORMANCE.md,
# issue 13): 4 MPI ranks, 2 per host (ranks 0,1 on host 0), links shaped to
# RATE by scripts/netsim.sh. pack: each tensor-parallel group on one host, the
# gradient allreduce crosses the link; spread: each group across the link.
# Plain data parallelism over the 4 ranks (dp4) for reference. Alternated for
# ROUNDS rounds, medians. Needs root. Usage:
#   bash bench/tensor_placement.sh [ROUNDS] [RATE] [MODEL] [BATCH] [STEPS] [OUTDIR]
set -euo pipefail
rounds=${1:-2}
rate=${2:-1gbit}
model=${3:-gpt-small}
batch=${4:-8}
steps=${5:-10}
out=${6:-$(mktemp -d /tmp/bench-tp-placement-XXXXXX)}
mkdir -p "$out"
root=$(cd "$(dirname "$0")/.." && pwd)
net="$root/scripts/netsim.sh"
bash "$net" up 2 --rate "$rate" >/dev/null
trap 'bash "$net" down >/dev/null 2>&1 || true' EXIT
args=(train --backend mpi --workers 4 --model "$model" --max-steps "$steps" --batch-size "$batch"
      --eval-batches 1 --progress off)
run() {  # name, extra flags...
  local name=$1 r=$2; shift 2
  bash "$net" mpirun -np 4 --ranks-per-host 2 -- "$root/build/dtrain" "${args[@]}" "$@" 2>/dev/null |
    tail -1 > "$out/$name.$r.json"
}
for r in $(seq 1 "$rounds"); do
  run pack "$r" --tensor-parallel 2 --placement pack
  run spread "$r" --tensor-parallel 2 --placement spread
  run dp4 "$r"
done
/usr/bin/python3 - "$out" "$rate" <<'PY'
import glob, json, statistics, sys
out, rate = sys.argv[1], sys.argv[2]
for k in ("pack", "spread", "dp4"):
    rs = [json.load(open(f)) for f in sorted(glob.glob(f"{out}/{k}.*.json"))]
    rate_ = statistics.median(r["samples_per_s"] for r in rs)
    tp = rs[0].get("tp_bytes_sent_per_step")
    dp = rs[0].get("bytes_sent_per_worker")
    print(f"{k} at {rate}: samples/s {[round(r['samples_per_s'], 2) for r in rs]} median {rate_:.2f}; "
          f"rank 0 sends per step: tensor-parallel {tp and round(tp / 2**20, 2)} MiB, "
          f"data-parallel {dp and round(dp / 2**20, 2)} MiB")
PY
