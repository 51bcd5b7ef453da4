#!/usr/bin/env bash
# Streaming shards against the disk's sequential read rate, page cache dropped before each
# (root: /proc/sys/vm/drop_caches), rounds alternating, medians.
#   bench/shard_read_rate.sh [BUILD_DIR] [ROUNDS] [SAMPLES]
# Writes SAMPLES (default 40000) samples of uint8 [3, 64, 64] (12 KiB each, about 0.5 GB)
# as 8 shards under a temporary directory, then per round: dd of the shards (bs 1M), and
# shard_stream_bench with 1 and 2 loader threads.
set -euo pipefail
build="${1:-build}"; rounds="${2:-3}"; samples="${3:-40000}"
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
/usr/bin/python3 - "$dir" "$samples" <<'PY'
import io, sys, tarfile, numpy as np
d, n = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(0)
per = n // 8
for s in range(8):
    with tarfile.open("%s/s-%d.tar" % (d, s), "w", format=tarfile.USTAR_FORMAT) as tar:
        for i in range(per):
            b = io.BytesIO(); np.save(b, rng.integers(0, 256, size=(3, 64, 64), dtype=np.uint8))
            for name, payload in (("%07d.npy" % i, b.getvalue()), ("%07d.cls" % i, str(i % 10).encode())):
                info = tarfile.TarInfo(name); info.size = len(payload); tar.addfile(info, io.BytesIO(payload))
PY
bytes=$(cat "$dir"/s-*.tar | wc -c)
for r in $(seq "$rounds"); do
  sync; echo 3 > /proc/sys/vm/drop_caches
  start=$(date +%s.%N); cat "$dir"/s-*.tar | dd of=/dev/null bs=1M status=none; end=$(date +%s.%N)
  echo "{\"round\": $r, \"dd_mb_per_s\": $(echo "$bytes / ($end - $start) / 1000000" | bc -l | cut -c1-7)}"
  for t in 1 2; do
    echo "{\"round\": $r, \"loader_threads\": $t, \"stream\": $("$build"/bench/shard_stream_bench "$dir/s-{0..7}.tar" "$t" --drop-caches)}"
  done
done
