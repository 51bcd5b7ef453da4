#!/usr/bin/env bash
# Installs dtrain from BUILD_DIR into a temporary prefix, then configures, builds
# and runs the outside project next to this script (tests/package) and every
# example under examples/ against it, each for a few steps:
# find_package(dtrain CONFIG REQUIRED) + dtrain::dtrain must be all it takes.
#   check_package.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-package.XXXXXX")
trap 'rm -rf "$work"' EXIT

cmake --install "$build" --prefix "$work/prefix" >/dev/null
# The installed tree alone: the source tree's src/ must not be what the user compiles against.
test -f "$work/prefix/include/dtrain/nn/Module.h"
test -f "$work/prefix/lib/cmake/dtrain/dtrainConfig.cmake"
if grep -rq -- "-march=native" "$work/prefix/lib/cmake/dtrain"; then
  echo "check_package: -march=native leaks into the exported targets" >&2; exit 1
fi

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S "$here" -B "$work/app" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/app"
"$work/app/app"

# The examples, built from outside as a user builds them, run for a few steps.
examples="$here/../../examples"
for ex in residual-cnn own-arrays lora-finetune; do
  cmake -S "$examples/$ex" -B "$work/$ex" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
  cmake --build "$work/$ex" >/dev/null
done
cd "$work"
out=$("$work/residual-cnn/residual_cnn" 1 20)
echo "$out" | grep -q '"strategy":"allreduce"' && echo "$out" | grep -q '"workers":2'
"$work/residual-cnn/residual_cnn" train --model residual-cnn --dataset synthetic --synthetic-size 256 \
    --max-steps 3 --progress off | grep -q '"model":"residual-cnn"'
out=$("$work/own-arrays/own_arrays" 400)
# Two spirals: the mlp must learn them (chance is 0.5).
python3 -c "import json,sys; r=json.loads(sys.argv[1]); assert r['test_accuracy'] > 0.8, r['test_accuracy']" "$out"
python3 -c "print('In the beginning God created the heaven and the earth. ' * 400)" > "$work/text.txt"
"$work/lora-finetune/lora_finetune" "$work/text.txt" - 3 "$work/adapters.safetensors" >/dev/null
test -s "$work/adapters.safetensors"
echo "check_package: the package, 3 examples built and run"
