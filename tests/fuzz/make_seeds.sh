#!/usr/bin/env bash
# Writes the fuzz targets' seed inputs (valid files of each format) into
# corpus/<target>/seed-*; run once from a build tree: bash make_seeds.sh BUILD_DIR.
# The fuzzer's own finds are kept beside them as found-* (see docs/RELIABILITY.md).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="$(cd "${1:?usage: make_seeds.sh BUILD_DIR}" && pwd)"
c="$here/corpus"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 - "$c" "$tmp" <<'PY'
import gzip, io, json, struct, sys
import numpy as np
c, tmp = sys.argv[1], sys.argv[2]
def npy(path, a, version=None, fortran=False):
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.asfortranarray(a) if fortran else a, version=version)
    open(path, "wb").write(buf.getvalue())
rng = np.random.default_rng(0)
X = rng.standard_normal((12, 4)).astype(np.float32); y = (np.arange(12) % 3).astype(np.int64)
npy(f"{tmp}/X.npy", X); npy(f"{tmp}/y.npy", y)
npy(f"{c}/npy/seed-f4.npy", X[:3]); npy(f"{c}/npy/seed-i8.npy", y[:5])
npy(f"{c}/npy/seed-u1.npy", np.arange(8, dtype=np.uint8).reshape(2, 2, 2), version=(2, 0))
npy(f"{c}/npy/seed-f8-fortran.npy", np.ones((2, 3)), fortran=True)
def idx(dims, data):
    return struct.pack(">I", 0x800 | len(dims)) + b"".join(struct.pack(">I", d) for d in dims) + bytes(data)
open(f"{c}/idx/seed-images.idx", "wb").write(idx([2, 3, 3], range(18)))
open(f"{c}/idx/seed-labels.idx", "wb").write(idx([4], [0, 1, 2, 9]))
open(f"{c}/idx/seed-images.idx.gz", "wb").write(gzip.compress(idx([1, 2, 2], [1, 2, 3, 4])))
# Server statistics for 3 workers, as a server writes them (ServerStats::toJson).
mem = [0] * 8
stats = {"server": 0, "updates": 5, "pushes": 15, "dropped": 1, "bytes_in": 100, "bytes_out": 90,
         "seconds": 0.5, "staleness": [3] + [0] * 32, "applied_per_step": [3, 3],
         "dropped_per_step": [0, 1], "ssp_max_ahead": 0, "dead_workers": [2],
         "readmitted_workers": [], "worker_wait_s": [0.1, 0.2, -1], "memory": mem,
         "worker_memory": [mem, mem, mem]}
open(f"{c}/serverstats/seed-3-workers.json", "w").write(json.dumps(stats))
# Codec messages: byte 0 picks the codec, bytes 1-2 the bucket size.
for k in range(8):
    open(f"{c}/codecs/seed-{k}", "wb").write(bytes([k, 0, 16]) + bytes(range(64)))
PY
# A checkpoint of FuzzCheckpoint's model (mlp, 4 features, 3 classes) with Adam's state.
"$build/dtrain" train --model mlp --dataset npy --train-data "$tmp/X.npy" --train-labels "$tmp/y.npy" \
  --optimizer adam --lr 0.01 --batch-size 4 --max-steps 2 --save "$c/checkpoint/seed-adam.safetensors" >/dev/null
cp "$c/checkpoint/seed-adam.safetensors" "$c/safetensors/seed-checkpoint.safetensors"
cp "$here"/../../configs/*.toml "$c/config/"
for f in "$c"/config/*.toml; do mv "$f" "$c/config/seed-$(basename "$f")"; done
# Machine files: the shipped cluster files (seed-calibrated.json, a calibrate-style
# file with collectives and per-layer model times, is kept as written by hand).
mkdir -p "$c/machinefile"
for f in selene-a100 example-cpu; do cp "$here/../../plan/clusters/$f.json" "$c/machinefile/seed-$f.json"; done
# The wire messages of parameter servers, Sandblaster and federated rounds (FuzzPsMessages, FuzzSandblaster, FuzzFederated).
/usr/bin/python3 "$here/wire_seeds.py" "$c"
echo "seeds written under $c"
