#!/bin/bash
# resnet-20 training samples/s at batch 128 on one thread: dtrain vs PyTorch
# (/work/shared/bench/torch_resnet.py, the same network, SGD momentum 0.9,
# weight decay 5e-4, cosine lr), alternating runs, the median of each.
#   bench/resnet_vs_torch.sh [runs=3] [steps=40] [dtrain binary=build/dtrain]
set -euo pipefail
runs=${1:-3} steps=${2:-40} bin=${3:-build/dtrain}
torch_script=${TORCH_RESNET:-$(dirname "$0")/../../shared/bench/torch_resnet.py}
d=() t=()
for ((i = 0; i < runs; i++)); do
  d+=("$("$bin" train --model resnet-20 --batch-size 128 --threads 1 --max-steps "$steps" \
         --lr 0.1 --momentum 0.9 --weight-decay 5e-4 --schedule cosine --progress off 2>/dev/null |
         tail -1 | grep -o '"samples_per_s":[0-9.]*' | cut -d: -f2)")
  t+=("$(/usr/bin/python3 "$torch_script" --threads 1 --steps "$steps" --batch-size 128 |
         grep -o 'samples_per_s=[0-9.]*' | cut -d= -f2)")
  echo "run $i: dtrain ${d[-1]} samples/s, torch ${t[-1]} samples/s" >&2
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
md=$(median "${d[@]}") mt=$(median "${t[@]}")
echo "{\"model\": \"resnet-20\", \"batch\": 128, \"threads\": 1, \"steps\": $steps, \"runs\": $runs," \
     "\"dtrain_samples_per_s\": $md, \"torch_samples_per_s\": $mt," \
     "\"ratio\": $(awk -v a="$md" -v b="$mt" 'BEGIN {printf "%.2f", a / b}')}"
