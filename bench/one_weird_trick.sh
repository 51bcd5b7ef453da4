#!/bin/bash
# Krizhevsky's "one weird trick" against plain data parallelism (docs/PERFORMANCE.md,
# issue 13): lenet on 2 local ranks, B samples per rank, 1000 steps; plain allreduce
# (--workers 2) vs the convolutions data-parallel and the fully-connected pair cut
# (--tensor-parallel 2 --tensor-parallel-style krizhevsky), alternated for ROUNDS
# rounds; prints samples/s and the bytes each rank sends per step, medians.
# RATE=100mbit: the 2 ranks as MPI processes on 2 emulated hosts joined by a link of
# that rate (scripts/netsim.sh; needs root) instead of threads of one process.
# Usage: [RATE=100mbit] bash bench/one_weird_trick.sh [ROUNDS] [BATCHES]   (BATCHES default "8 16 32 64 128")
set -euo pipefail
rounds=${1:-3}
batches=${2:-8 16 32 64 128}
root=$(dirname "$0")/..
launch=("$root/build/dtrain")
args=(train --model lenet --max-steps 1000 --eval-batches 1 --progress off)
if [ -n "${RATE:-}" ]; then
  bash "$root/scripts/netsim.sh" up 2 --rate "$RATE" >/dev/null
  trap 'bash "$root/scripts/netsim.sh" down >/dev/null' EXIT
  launch=(bash "$root/scripts/netsim.sh" mpirun -np 2 --ranks-per-host 1 -- "$root/build/dtrain")
  args=(train --backend mpi --model lenet --max-steps 300 --eval-batches 1 --progress off)
fi
out=$(mktemp -d /tmp/bench-owt-XXXXXX)
for r in $(seq 1 "$rounds"); do
  for b in $batches; do
    "${launch[@]}" "${args[@]}" --batch-size "$b" --workers 2 2>/dev/null | tail -1 > "$out/dp.$b.$r.json"
    "${launch[@]}" "${args[@]}" --batch-size "$b" --tensor-parallel 2 --tensor-parallel-style krizhevsky \
      2>/dev/null | tail -1 > "$out/owt.$b.$r.json"
  done
done
/usr/bin/python3 - "$out" "$batches" <<'PY'
import glob, json, statistics, sys
out, batches = sys.argv[1], sys.argv[2].split()
print("| samples per rank | dp: samples/s | one weird trick: samples/s | dp: KiB sent per rank per step | one weird trick: KiB |")
print("|---|---|---|---|---|")
for b in batches:
    def med(kind, key):
        return statistics.median(json.load(open(f))[key] for f in glob.glob(f"{out}/{kind}.{b}.*.json"))
    print(f"| {b} | {med('dp', 'samples_per_s'):.0f} | {med('owt', 'samples_per_s'):.0f} | "
          f"{med('dp', 'bytes_sent_per_worker') / 1024:.0f} | {med('owt', 'tp_bytes_sent_per_step') / 1024:.0f} |")
PY
