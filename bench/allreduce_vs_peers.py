#!/usr/bin/python3
"""Allreduce busbw: dtrain (local shm/ring; mpi shm/ring/rhd/tree/native) vs OpenMPI's
MPI_Allreduce (../shared/bench/mpi_allreduce.c) and Gloo (../shared/bench/gloo_allreduce.py),
alternating rounds on the same machine; medians and ratios per size.

  bench/allreduce_vs_peers.py [--ranks 2,4] [--rounds 3] [--min-bytes 1048576]
Prints markdown tables (busbw GB/s, ratio to OpenMPI and to Gloo).
"""
import argparse, collections, json, os, re, statistics, subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "bench")
DTRAIN = os.path.join(ROOT, "build", "dtrain")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
MPIRUN = ["mpirun", "--oversubscribe", "-np"]

def sh(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, env=ENV).stdout

def peer_rows(text, name, d, n, lo):
    for m in re.finditer(r"(?:mpi|gloo) n=\d+ bytes=(\d+) us=([\d.]+) algbw_GBs=[\d.]+ busbw_GBs=([\d.]+)", text):
        if int(m[1]) >= lo:
            d[(n, name, int(m[1]))].append(float(m[3]))

def dtrain_rows(text, backend, d, n):
    j = json.loads(text.strip().splitlines()[-1])
    for r in j["rows"]:
        assert r["ok"], r
        d[(n, f"dtrain {backend} {r['algo']}", r["bytes"])].append(r["busbw_GBs"])

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--min-bytes", type=int, default=1 << 20)
    ap.add_argument("--max-bytes", type=int, default=64 << 20)
    a = ap.parse_args()
    exe = "/tmp/dtrain_mpi_allreduce"
    subprocess.run(["mpicc", "-O2", os.path.join(SHARED, "mpi_allreduce.c"), "-o", exe], check=True)
    d = collections.defaultdict(list)
    sizes = f"--min-bytes {a.min_bytes} --max-bytes {a.max_bytes} --step-factor 4 --json".split()
    for n in [int(x) for x in a.ranks.split(",")]:
        for _ in range(a.rounds):
            peer_rows(sh(MPIRUN + [str(n), exe]), "openmpi MPI_Allreduce", d, n, a.min_bytes)
            dtrain_rows(sh([DTRAIN, "bench", "allreduce", "--backend", "local", "--workers", str(n),
                            "--algo", "shm,ring"] + sizes), "local", d, n)
            dtrain_rows(sh(MPIRUN + [str(n), DTRAIN, "bench", "allreduce", "--backend", "mpi", "--workers",
                                     str(n), "--algo", "shm,ring,rhd,tree,native"] + sizes), "mpi", d, n)
            peer_rows(sh(["/usr/bin/python3", os.path.join(SHARED, "gloo_allreduce.py"), str(n)]),
                      "gloo (torch 1.13)", d, n, a.min_bytes)
        all_sizes = sorted({k[2] for k in d if k[0] == n and a.min_bytes <= k[2] <= a.max_bytes})
        impls = sorted({k[1] for k in d if k[0] == n})
        med = {(i, s): statistics.median(d[(n, i, s)]) for i in impls for s in all_sizes if d[(n, i, s)]}
        fmt = lambda b: f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"
        print(f"\n{n} ranks: busbw GB/s, median of {a.rounds} (x OpenMPI, x Gloo)\n")
        print("| implementation | " + " | ".join(fmt(s) for s in all_sizes) + " |")
        print("|---|" + "---|" * len(all_sizes))
        for i in impls:
            cells = []
            for s in all_sizes:
                v = med.get((i, s))
                o, g = med.get(("openmpi MPI_Allreduce", s)), med.get(("gloo (torch 1.13)", s))
                cells.append("-" if v is None else f"{v:.2f} ({v / o:.1f}x, {v / g:.1f}x)" if o and g else f"{v:.2f}")
            print(f"| {i} | " + " | ".join(cells) + " |")

if __name__ == "__main__":
    main()
