#!/bin/bash
# DiLoCo on gpt-small from a synchronous start (the DiLoCo paper's set-up, scaled down):
# 1,000 allreduce steps with a checkpoint at step 1,000, then steps 1,000-3,000 once with
# DiLoCo H = 50 and once with allreduce, over the same tokens. 4 workers as threads; about
# 30 minutes on 2 Zen 4 cores. Results (the --metrics files) land in $DIR.
#   bash bench/diloco_gpt_small/run.sh            # DTRAIN=build/dtrain DIR=/tmp/diloco
# Then the plot: bench/local_sgd.py --plot P.png --runs "allreduce=$DIR/ar.jsonl,DiLoCo=$DIR/diloco.jsonl"
set -e
B=$(realpath "${DTRAIN:-build/dtrain}")
DIR=${DIR:-/tmp/diloco}
COMMON="--model gpt-small --workers 4 --seed 0 --eval-deferred --progress off"
mkdir -p "$DIR" && cd "$DIR"
"$B" train $COMMON --max-steps 1001 --eval-every 100 --strategy allreduce --checkpoint-every 1000 \
    --checkpoint-dir "$DIR/pre" --metrics pre.jsonl > pre.out
"$B" train $COMMON --max-steps 3000 --eval-every 250 --resume "$DIR/pre/step-000001000.safetensors" \
    --strategy local-sgd --sync-every 50 --outer-optimizer nesterov --outer-lr 0.7 --outer-momentum 0.9 \
    --metrics diloco.jsonl > diloco.out
"$B" train $COMMON --max-steps 3000 --eval-every 250 --resume "$DIR/pre/step-000001000.safetensors" \
    --strategy allreduce --metrics ar.jsonl > ar.out
