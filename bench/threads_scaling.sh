#!/bin/bash
# Intra-op threads: resnet-20, gpt-small and the mlp at --threads 1 and 2 (and auto,
# and bf16 for resnet-20), 3 alternating rounds; run on a quiet machine.
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
uptime
for round in 1 2 3; do
  for cfg in "t1|--threads 1" "t2|--threads 2" "bf16-t1|--threads 1 --precision bf16" "auto|"; do
    name=${cfg%%|*}; flags=${cfg#*|}
    env -u OMP_NUM_THREADS build/dtrain train --model resnet-20 --batch-size 128 --max-steps 40 --progress off $flags 2>/dev/null | tail -1 | \
      python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print('$round', '$name', round(d['samples_per_s'],1), d['threads'])"
  done
  for cfg in "gpt-t1|--threads 1" "gpt-t2|--threads 2"; do
    name=${cfg%%|*}; flags=${cfg#*|}
    env -u OMP_NUM_THREADS build/dtrain train --model gpt-small --max-steps 30 --eval-batches 1 --progress off $flags 2>/dev/null | tail -1 | \
      python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print('$round', '$name', round(d.get('tokens_per_s', d['samples_per_s']),1), d['threads'])"
  done
  for cfg in "mlp-t1|--threads 1" "mlp-t2|--threads 2"; do
    name=${cfg%%|*}; flags=${cfg#*|}
    env -u OMP_NUM_THREADS build/dtrain train --model mlp --max-steps 600 --progress off $flags 2>/dev/null | tail -1 | \
      python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print('$round', '$name', round(d['samples_per_s'],1), d['threads'])"
  done
done
uptime
