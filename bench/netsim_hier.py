#!/usr/bin/python3
"""The hierarchical allreduce across emulated hosts (scripts/netsim.sh) against the
flat ring and OpenMPI's MPI_Allreduce (dtrain's `native`: the library's own blocking
MPI_Allreduce, call checks off so that nothing else runs beside it). Each algorithm
in its own mpirun, their order rotated every round; medians of algbw (MB/s).

  flock /tmp/netsim.lock bench/netsim_hier.py [--layout 2x2] [--rates 1gbit,100mbit]
      [--rounds 3] [--min-bytes 4194304] [--max-bytes 67108864] [--iters 2]
Needs root; leaves the network down. DTRAIN_NETSIM_ID picks the netsim instance.
"""
import argparse, collections, json, os, statistics, subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTRAIN = os.path.join(ROOT, "build", "dtrain")
NETSIM = os.path.join(ROOT, "scripts", "netsim.sh")
NAMES = {"hier": "dtrain hier", "ring": "dtrain ring", "native": "OpenMPI MPI_Allreduce"}


def sh(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layout", default="2x2")
    ap.add_argument("--rates", default="1gbit,100mbit")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--algos", default="hier,ring,native")
    ap.add_argument("--min-bytes", type=int, default=4 << 20)
    ap.add_argument("--max-bytes", type=int, default=64 << 20)
    ap.add_argument("--iters", type=int, default=2)
    a = ap.parse_args()
    hosts, rph = (int(x) for x in a.layout.split("x"))
    n = hosts * rph
    algos = a.algos.split(",")
    d = collections.defaultdict(list)
    loads = []
    try:
        for rate in a.rates.split(","):
            sh(["bash", NETSIM, "up", str(hosts), "--rate", rate])
            run = ["bash", NETSIM, "mpirun", "-np", str(n), "--ranks-per-host", str(rph), "--"]
            for k in range(a.rounds):
                for algo in algos[k % len(algos):] + algos[:k % len(algos)]:
                    loads.append(os.getloadavg()[0])
                    out = sh(run + [DTRAIN, "bench", "allreduce", "--backend", "mpi", "--workers", str(n),
                                    "--algo", algo, "--no-call-checks", "--min-bytes", str(a.min_bytes),
                                    "--max-bytes", str(a.max_bytes), "--iters", str(a.iters),
                                    "--runs", "1", "--json"])
                    for r in json.loads(out.strip().splitlines()[-1])["rows"]:
                        assert r["ok"], r
                        d[(rate, algo, r["bytes"])].append(r["algbw_GBs"] * 1e3)
            sh(["bash", NETSIM, "down"])
    finally:
        subprocess.run(["bash", NETSIM, "down"], check=False)
    sizes = sorted({k[2] for k in d})
    print(f"load average while measuring: {min(loads):.1f}-{max(loads):.1f}")
    for rate in a.rates.split(","):
        print(f"\n{hosts} hosts x {rph} ranks at {rate}: algbw MB/s, median of {a.rounds} "
              "(x ring, x OpenMPI)\n")
        print("| implementation | " + " | ".join(f"{s >> 20} MiB" for s in sizes) + " |")
        print("|---|" + "---|" * len(sizes))
        for algo in algos:
            cells = []
            for s in sizes:
                v = statistics.median(d[(rate, algo, s)])
                ring = statistics.median(d[(rate, "ring", s)]) if "ring" in algos else v
                mpi = statistics.median(d[(rate, "native", s)]) if "native" in algos else v
                cells.append(f"{v:.1f} ({v / ring:.2f}x, {v / mpi:.2f}x)")
            print(f"| {NAMES.get(algo, algo)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
