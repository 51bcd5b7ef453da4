#!/usr/bin/env bash
# A user's model against the built-in of the same layers, and a config file
# against the same flags: samples/s of `train` on Fashion-MNIST, 1 thread,
# alternating runs, medians. Also checks the runs end bitwise equal.
#   bash bench/user_model.sh [ROUNDS] [STEPS]      (defaults 5, 1500)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}; steps=${2:-1500}
bin=build/dtrain; user=build/bench/user_model_cli
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
printf '[training]\nmax_steps = %s\nseed = 3\n[logging]\nprogress = "off"\n' "$steps" > "$tmp/run.toml"
run() { "$@" | tail -1 | python3 -c "import json,sys; print(json.load(sys.stdin)['samples_per_s'])"; }
# The data section of a safetensors file (after its 8-byte length and JSON header).
tensors() { python3 -c "import hashlib,struct,sys; d=open(sys.argv[1],'rb').read(); n=struct.unpack('<Q',d[:8])[0]; print(hashlib.sha256(d[8+n:]).hexdigest())" "$1"; }
declare -A results
for r in $(seq "$rounds"); do
  for model in mlp lenet; do
    results[$model-builtin]+=" $(run $bin train --model $model --max-steps $steps --seed 3 --progress off --save $tmp/b.st)"
    results[$model-user]+=" $(run $user train --model user-$model --max-steps $steps --seed 3 --progress off --save $tmp/u.st)"
    # The same layers, seed and data: the parameters end bitwise equal (the
    # checkpoints differ only in their header's model name).
    [ "$(tensors $tmp/b.st)" = "$(tensors $tmp/u.st)" ] || { echo "user-$model and $model trained differently" >&2; exit 1; }
    results[$model-file]+=" $(run $bin train --model $model --config $tmp/run.toml)"
  done
done
for key in mlp-builtin mlp-user mlp-file lenet-builtin lenet-user lenet-file; do
  python3 -c "import statistics,sys; v=[float(x) for x in sys.argv[2].split()]; print(f'{sys.argv[1]:14s} median {statistics.median(v):9.0f} samples/s  runs {sorted(round(x) for x in v)}')" "$key" "${results[$key]}"
done
