#!/usr/bin/env bash
# FedAvg across emulated hosts with one slow host: the server (host 0) and two client
# hosts on fast links, a third client host on a slow link, and the wall-clock round
# deadline (--deadline-clock wall) against waiting for every update.
#
#   bench/fedavg_slow_host.sh [SLOW_RATE] [DEADLINE_S] [TARGET] [ROUNDS] [RUNS]
#   (defaults: 10mbit 0.5 0.80 60 1; needs root, see scripts/netsim.sh)
#
# Prints one line per run (rounds and wall seconds to the target accuracy, the
# median round, the late clients) and brings the network down at the end.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
rate="${1:-10mbit}" deadline="${2:-0.5}" target="${3:-0.80}" rounds="${4:-60}" runs="${5:-1}"
netsim="$here/scripts/netsim.sh"
dtrain="$here/build/dtrain"
[[ -x "$dtrain" ]] || { echo "fedavg_slow_host.sh: build dtrain first ($dtrain)" >&2; exit 2; }
"$netsim" up 4 --rate 1gbit --host-rate "3=$rate" >/dev/null
trap '"$netsim" down >/dev/null' EXIT
common=(train --strategy fedavg --backend mpi --model mlp --clients 100 --client-fraction 0.1
        --local-epochs 1 --local-batch 10 --lr 0.05 --rounds "$rounds" --target-accuracy "$target"
        --progress off --deadline-clock wall)
summary() {  # the final JSON line -> one readable line
  /usr/bin/python3 -c '
import json, sys
d = json.loads(sys.stdin.read().strip().splitlines()[-1])
print("%18s: rounds %d, rounds to %s: %s, %.1f s, round median %.3f s, late clients %d, accuracy %.4f"
      % (sys.argv[1], d["rounds"], d["target_accuracy"], d["rounds_to_target"], d["seconds"],
         d["round_s_median"], d.get("clients_late", 0), d["test_accuracy"]))' "$1"
}
echo "4 hosts: server on host 0, clients on hosts 1-3; links 1gbit, host 3 at $rate"
for ((r = 0; r < runs; r++)); do
  "$netsim" mpirun -np 4 -- "$dtrain" "${common[@]}" | summary "no deadline"
  "$netsim" mpirun -np 4 -- "$dtrain" "${common[@]}" --round-deadline-s "$deadline" |
    summary "deadline ${deadline} s"
done
