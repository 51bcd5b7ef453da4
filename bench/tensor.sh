#!/bin/bash
# Tensor-parallel throughput and memory per rank against one process and data
# parallelism (docs/PERFORMANCE.md, issue 13). One global batch of BATCH
# sequences per step, STEPS steps of MODEL, alternated for ROUNDS rounds:
#   single1  one process, 1 thread          single2  one process, 2 threads
#   tp2      --tensor-parallel 2 (2 ranks x 1 thread, batch BATCH in one group)
#   dp2      --workers 2 allreduce (2 ranks x 1 thread, BATCH/2 each)
# Prints each run and the medians; efficiency = samples/s / (ranks x single1).
# Usage: bash bench/tensor.sh [ROUNDS] [MODEL] [BATCH] [STEPS] [OUTDIR]
set -euo pipefail
rounds=${1:-3}
model=${2:-gpt-base}
batch=${3:-8}
steps=${4:-10}
out=${5:-$(mktemp -d /tmp/bench-tensor-XXXXXX)}
mkdir -p "$out"
bin=$(dirname "$0")/../build/dtrain
args=(train --model "$model" --max-steps "$steps" --eval-batches 1 --progress off)
for r in $(seq 1 "$rounds"); do
  "$bin" "${args[@]}" --batch-size "$batch" --threads 1 2>/dev/null | tail -1 > "$out/single1.$r.json"
  "$bin" "${args[@]}" --batch-size "$batch" --threads 2 2>/dev/null | tail -1 > "$out/single2.$r.json"
  "$bin" "${args[@]}" --batch-size "$batch" --tensor-parallel 2 2>/dev/null | tail -1 > "$out/tp2.$r.json"
  "$bin" "${args[@]}" --batch-size $((batch / 2)) --workers 2 2>/dev/null | tail -1 > "$out/dp2.$r.json"
done
/usr/bin/python3 - "$out" <<'PY'
import glob, json, statistics, sys
out = sys.argv[1]
runs = {k: [json.load(open(f)) for f in sorted(glob.glob(f"{out}/{k}.*.json"))]
        for k in ("single1", "single2", "tp2", "dp2")}
base = statistics.median(r["samples_per_s"] for r in runs["single1"])
for k, rs in runs.items():
    rate = statistics.median(r["samples_per_s"] for r in rs)
    ranks = len(rs[0]["memory_per_rank"])
    peak = [round(m["peak"] / 2**20, 1) for m in rs[0]["memory_per_rank"]]
    states = [round((m["parameters"] + m["gradients"] + m["optimizer_state"]) / 2**20, 2)
              for m in rs[0]["memory_per_rank"]]
    print(f"{k}: samples/s {[round(r['samples_per_s'], 2) for r in rs]} median {rate:.2f}, "
          f"{rate / base:.2f}x single1, efficiency {100 * rate / (ranks * base):.0f}%; "
          f"model states MiB per rank {states}; peak MiB per rank {peak}; "
          f"loss {statistics.median(r['train_loss'] for r in rs):.4f}")
PY
