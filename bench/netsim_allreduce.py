#!/usr/bin/python3
"""Allreduce across emulated hosts (scripts/netsim.sh): dtrain's mpi-backend algorithms
against OpenMPI's MPI_Allreduce (../shared/bench/mpi_allreduce.c) on the same emulated
network, alternating rounds; medians of algbw (MB/s = bytes / time) per size.

  bench/netsim_allreduce.py [--layouts 2x1,4x1,2x2] [--rate 1gbit] [--rounds 3]
A layout HxR is H emulated hosts with R ranks each. Needs root; leaves the network down.
"""
import argparse, collections, json, os, re, statistics, subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "bench")
DTRAIN = os.path.join(ROOT, "build", "dtrain")
NETSIM = os.path.join(ROOT, "scripts", "netsim.sh")
PEER = "/tmp/dtrain_netsim_mpi_allreduce"

def sh(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layouts", default="2x1,4x1,2x2")
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--algos", default="ring,rhd,tree,hier,native")
    ap.add_argument("--min-bytes", type=int, default=1 << 20)
    ap.add_argument("--max-bytes", type=int, default=16 << 20)
    a = ap.parse_args()
    subprocess.run(["mpicc", "-O2", os.path.join(SHARED, "mpi_allreduce.c"), "-o", PEER], check=True)
    d = collections.defaultdict(list)
    try:
        for layout in a.layouts.split(","):
            hosts, rph = (int(x) for x in layout.split("x"))
            n = hosts * rph
            sh(["bash", NETSIM, "up", str(hosts), "--rate", a.rate])
            run = ["bash", NETSIM, "mpirun", "-np", str(n), "--ranks-per-host", str(rph), "--"]
            for _ in range(a.rounds):
                # bytes/us: the peer prints algbw with only 0.01 GB/s resolution.
                for m in re.finditer(r"mpi n=\d+ bytes=(\d+) us=([\d.]+)", sh(run + [PEER])):
                    if a.min_bytes <= int(m[1]) <= a.max_bytes:
                        d[(layout, "openmpi MPI_Allreduce", int(m[1]))].append(int(m[1]) / float(m[2]))
                out = sh(run + [DTRAIN, "bench", "allreduce", "--backend", "mpi", "--workers", str(n),
                                "--algo", a.algos, "--min-bytes", str(a.min_bytes), "--max-bytes",
                                str(a.max_bytes), "--step-factor", "4", "--runs", "3", "--json"])
                for r in json.loads(out.strip().splitlines()[-1])["rows"]:
                    assert r["ok"], r
                    d[(layout, f"dtrain {r['algo']}", r["bytes"])].append(r["algbw_GBs"] * 1e3)
    finally:
        subprocess.run(["bash", NETSIM, "down"], check=False)
    sizes = sorted({k[2] for k in d})
    for layout in a.layouts.split(","):
        hosts, rph = layout.split("x")
        print(f"\n{hosts} hosts x {rph} ranks at {a.rate}: algbw MB/s, median of {a.rounds} (x OpenMPI)\n")
        print("| implementation | " + " | ".join(f"{s >> 20} MiB" for s in sizes) + " |")
        print("|---|" + "---|" * len(sizes))
        names = sorted({k[1] for k in d if k[0] == layout})
        for name in names:
            cells = []
            for s in sizes:
                v = statistics.median(d[(layout, name, s)])
                ref = statistics.median(d[(layout, "openmpi MPI_Allreduce", s)])
                cells.append(f"{v:.0f} ({v / ref:.2f}x)")
            print(f"| {name} | " + " | ".join(cells) + " |")

if __name__ == "__main__":
    main()
