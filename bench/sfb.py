#!/usr/bin/python3
"""Sufficient factor broadcasting (issue 30, part 2): --sfb off (plain allreduce), --sfb auto and
--compress powersgd on emulated hosts, for the mlp with wide hidden layers, per per-worker batch.

  flock /tmp/netsim.lock bench/sfb.py [--hosts 4] [--rate 100mbit] [--hidden 2048,2048]
                                      [--batches 8,16,64] [--steps 30] [--only off,auto,powersgd]
                                      [--out FILE.csv]

Brings up `scripts/netsim.sh up HOSTS --rate RATE` (one rank per host, mpi backend) and takes it
down at the end; the caller holds the netsim lock. Each run: `dtrain train --backend mpi --model
mlp --mlp-hidden H --batch-size B --max-steps S` with one of CONFIGS. CSV columns: batch, config,
sfb_layers (the weights sent as factors), bytes_sent_per_worker (per step, measured by the
communicator on rank 0), predicted_bytes (ring formulas, below), samples_per_s, compute_ms,
comm_ms, exposed_comm_ms.

Predicted bytes per step and rank with W ranks, a Linear weight of M x N and B rows per rank:
plain ring allreduce 2 (W-1)/W x 4 M N; SFB's ring allgather (W-1) x 4 B (M+N) (each rank
forwards the factors of the W-1 others); biases and non-SFB weights keep the allreduce formula.
"""
import argparse, csv, json, os, shlex, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTRAIN = os.path.join(ROOT, "build", "dtrain")
NETSIM = os.path.join(ROOT, "scripts", "netsim.sh")
CONFIGS = {
    "off": "--sfb off",
    "auto": "--sfb auto",
    "on": "--sfb on",
    "powersgd": "--compress powersgd --compress-rank 4 --compress-start-step 0",
}


def layers(hidden, features=784, classes=10):
    """(M, N) of each Linear weight of the mlp, in order."""
    widths = [features] + hidden + [classes]
    return [(widths[i + 1], widths[i]) for i in range(len(widths) - 1)]


def predicted(hidden, w, b, sfb_names):
    total = 0.0
    for i, (m, n) in enumerate(layers(hidden)):
        name = f"{2 * i + 1}.weight"
        total += (w - 1) * 4 * b * (m + n) if name in sfb_names else 2 * (w - 1) / w * 4 * m * n
        total += 2 * (w - 1) / w * 4 * m  # the bias
    return total


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hosts", type=int, default=4)
    p.add_argument("--rate", default="100mbit")
    p.add_argument("--hidden", default="2048,2048")
    p.add_argument("--batches", default="8,16,64")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--only", default="off,auto,powersgd")
    p.add_argument("--out", default="/tmp/dtrain-sfb.csv")
    a = p.parse_args()
    hidden = [int(x) for x in a.hidden.split(",")]
    up = subprocess.run([NETSIM, "up", str(a.hosts), "--rate", a.rate], capture_output=True, text=True)
    if up.returncode != 0:
        sys.exit(f"sfb.py: netsim: {up.stderr.strip()}")
    rows = []
    try:
        for b in map(int, a.batches.split(",")):
            for slug in a.only.split(","):
                cmd = (f"{NETSIM} mpirun -np {a.hosts} -- {DTRAIN} train --backend mpi --model mlp "
                       f"--mlp-hidden {a.hidden} --batch-size {b} --max-steps {a.steps} --progress off "
                       f"--lr 0.05 --momentum 0.9 --eval-batch 10000 {CONFIGS[slug]}")
                print("+", cmd, file=sys.stderr, flush=True)
                out = subprocess.run(shlex.split(cmd), capture_output=True, text=True)
                if out.returncode != 0:
                    sys.exit(f"sfb.py: {slug} B={b} failed: {out.stderr.strip()[-500:]}")
                r = json.loads(out.stdout.strip().splitlines()[-1])
                names = r.get("sfb_layers", [])
                row = {"batch": b, "config": slug, "sfb_layers": " ".join(names),
                       "bytes_sent_per_worker": round(r["bytes_sent_per_worker"]),
                       "predicted_bytes": round(predicted(hidden, a.hosts, b, names)) if slug != "powersgd" else "",
                       "samples_per_s": round(r["samples_per_s"], 1),
                       "compute_ms": round(r["compute_ms"], 1), "comm_ms": round(r["comm_ms"], 1),
                       "exposed_comm_ms": round(r["exposed_comm_ms"], 1)}
                print(row, file=sys.stderr, flush=True)
                rows.append(row)
    finally:
        subprocess.run([NETSIM, "down"], capture_output=True)
    with open(a.out, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=list(rows[0]))
        wr.writeheader()
        wr.writerows(rows)
    print(open(a.out).read())


if __name__ == "__main__":
    main()
