#!/bin/bash
# The wall time of the two methods at 100 Mbit/s on 4 emulated hosts, from run.sh's
# checkpoint: 30 allreduce steps and 100 DiLoCo steps (2 syncs); per-step figures in the
# final lines (seconds, samples_per_s). Hold the netsim lock:
#   flock /tmp/netsim.lock bash bench/diloco_gpt_small/netsim.sh
set -e
B=$(realpath "${DTRAIN:-build/dtrain}")
DIR=${DIR:-/tmp/diloco}
cd "$(dirname "$0")/../.."
scripts/netsim.sh up 4 --rate 100mbit > /dev/null
trap 'scripts/netsim.sh down > /dev/null' EXIT
COMMON="--model gpt-small --workers 4 --seed 0 --progress off --backend mpi --resume $DIR/pre/step-000001000.safetensors"
scripts/netsim.sh mpirun -np 4 -- "$B" train $COMMON --max-steps 1030 --strategy allreduce | tail -1 > "$DIR/netsim-allreduce.json"
scripts/netsim.sh mpirun -np 4 -- "$B" train $COMMON --max-steps 1100 --strategy local-sgd --sync-every 50 \
    --outer-optimizer nesterov --outer-lr 0.7 --outer-momentum 0.9 | tail -1 > "$DIR/netsim-diloco.json"
