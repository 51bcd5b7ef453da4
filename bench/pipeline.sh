#!/bin/bash
# Pipeline throughput against one process (docs/PERFORMANCE.md, issue 13):
# gpt-small, batch 32, 20 steps; one process, then 2 local stages with 1F1B,
# GPipe and interleaved 1F1B (--virtual-stages 2), M micro-batches (default
# 8 = 4P), alternated for ROUNDS rounds; prints each run's figures and the
# medians. Usage: bash bench/pipeline.sh [ROUNDS] [OUTDIR] [M]
set -euo pipefail
rounds=${1:-3}
out=${2:-$(mktemp -d /tmp/bench-pipeline-XXXXXX)}
micro=${3:-8}
bin=$(dirname "$0")/../build/dtrain
args=(train --model gpt-small --max-steps 20 --batch-size 32 --eval-batches 1 --progress off)
declare -A variant=([1f1b]="--pipeline-schedule 1f1b" [gpipe]="--pipeline-schedule gpipe"
                    [interleaved]="--pipeline-schedule 1f1b --virtual-stages 2")
for r in $(seq 1 "$rounds"); do
  "$bin" "${args[@]}" 2>/dev/null | tail -1 > "$out/single.$r.json"
  for s in 1f1b gpipe interleaved; do
    # shellcheck disable=SC2086
    "$bin" "${args[@]}" --pipeline-stages 2 --micro-batches "$micro" ${variant[$s]} 2>/dev/null |
      tail -1 > "$out/$s.$r.json"
  done
done
/usr/bin/python3 - "$out" <<'PY'
import glob, json, statistics, sys
out = sys.argv[1]
runs = {k: [json.load(open(f)) for f in sorted(glob.glob(f"{out}/{k}.*.json"))]
        for k in ("single", "1f1b", "gpipe", "interleaved")}
single = statistics.median(r["samples_per_s"] for r in runs["single"])
print(f"single: samples/s {[round(r['samples_per_s'], 1) for r in runs['single']]} median {single:.1f}")
for k in ("1f1b", "gpipe", "interleaved"):
    rs = runs[k]
    rate = statistics.median(r["samples_per_s"] for r in rs)
    ideal = 2 * (1 - rs[0]["pipeline_bubble_ideal"]) * single
    bubble = [round(statistics.median(r["pipeline_bubble_per_stage"][s] for r in rs), 3) for s in range(2)]
    print(f"{k}: samples/s {[round(r['samples_per_s'], 1) for r in rs]} median {rate:.1f}, "
          f"ideal 2(1-bubble) x single = {ideal:.1f}, {100 * rate / ideal:.0f}% of ideal; "
          f"bubble per stage {bubble} (ideal {rs[0]['pipeline_bubble_ideal']:.3f}); "
          f"cuts {rs[0]['pipeline_cuts']}; in flight {rs[0]['pipeline_peak_in_flight_per_stage']}; "
          f"activation MiB {[round(b / 2**20, 1) for b in rs[0]['pipeline_activation_bytes_peak_per_stage']]}; "
          f"parameter MiB {[round(b / 2**20, 2) for b in rs[0]['pipeline_parameter_bytes_per_stage']]}")
PY
