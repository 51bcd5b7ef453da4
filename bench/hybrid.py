#!/usr/bin/python3
"""dp x pp x tp layouts of one model across emulated hosts (issue 13): throughput and memory
per rank for every layout of N ranks, R ranks per emulated host (scripts/netsim.sh, tbf-shaped
links, real TCP between MPI processes), rounds alternating the layouts, medians.

  bench/hybrid.py [--ranks 4] [--per-host 2] [--rate 1gbit] [--model gpt-small]
                  [--global-batch 32] [--micro-batches 4] [--steps 10] [--rounds 2]
                  [--only dp4,dp2xtp2,...] [--zero 0,1,2] [--dir /tmp/dtrain-hybrid]

Each layout runs `netsim.sh mpirun -np N --ranks-per-host R -- dtrain train --backend mpi
--model M --workers N [--pipeline-stages P --micro-batches MB] [--tensor-parallel T]
--batch-size GLOBAL/dp --max-steps S [--zero Z]` (--zero: each layout with dp > 1 once per
listed ZeRO stage, which shards the dp dimension's optimizer state and gradients; --placement pack: tensor-parallel groups innermost,
so a group of T <= R ranks stays on one host). Needs root. Prints a markdown table: samples/s
(median); model states (parameters + gradients + optimizer state) of rank 0 (the reporter, which
also keeps the other stages' parameters to evaluate and save) and of the largest other rank;
peak bytes of the largest rank; rank 0's bytes sent per step within its tensor-parallel group.
"""
import argparse, json, os, statistics, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTRAIN = os.path.join(ROOT, "build", "dtrain")
NETSIM = os.path.join(ROOT, "scripts", "netsim.sh")


def layouts(n):
    """(dp, pp, tp) with dp * pp * tp = n, pp and tp in 1, 2, 4."""
    out = []
    for pp in (1, 2, 4):
        for tp in (1, 2, 4):
            if n % (pp * tp) == 0:
                out.append((n // (pp * tp), pp, tp))
    return out


def slug(dp, pp, tp, zero=0):
    parts = [f"dp{dp}"] if dp > 1 or (pp == 1 and tp == 1) else []
    parts += [f"pp{pp}"] if pp > 1 else []
    parts += [f"tp{tp}"] if tp > 1 else []
    return "x".join(parts) + (f" zero{zero}" if zero else "")


def run(a, layout, r):
    dp, pp, tp, zero = layout
    cmd = ["bash", NETSIM, "mpirun", "-np", str(a.ranks), "--ranks-per-host", str(a.per_host), "--",
           DTRAIN, "train", "--backend", "mpi", "--model", a.model, "--workers", str(a.ranks),
           "--batch-size", str(a.global_batch // dp), "--max-steps", str(a.steps),
           "--eval-batches", "1", "--progress", "off"]
    if pp > 1:
        cmd += ["--pipeline-stages", str(pp), "--micro-batches", str(a.micro_batches)]
    if tp > 1:
        cmd += ["--tensor-parallel", str(tp)]
    if zero:
        cmd += ["--zero", str(zero)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        print(f"{slug(*layout)}: failed: {p.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
        return None
    line = json.loads(p.stdout.strip().splitlines()[-1])
    with open(os.path.join(a.dir, f"{slug(*layout).replace(' ', '-')}-r{r}.json"), "w") as f:
        json.dump(line, f)
    return line


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--per-host", type=int, default=2)
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--model", default="gpt-small")
    ap.add_argument("--global-batch", type=int, default=32)
    ap.add_argument("--micro-batches", type=int, default=4)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--only", default="")
    ap.add_argument("--zero", default="0", help="ZeRO stages to run each dp > 1 layout with, e.g. 0,1,2")
    ap.add_argument("--dir", default="/tmp/dtrain-hybrid")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    hosts = a.ranks // a.per_host
    stages = [int(z) for z in a.zero.split(",")]
    todo = [l + (z,) for l in layouts(a.ranks) if not a.only or slug(*l) in a.only.split(",")
            for z in stages if z == 0 or l[0] > 1]
    up = subprocess.run(["bash", NETSIM, "up", str(hosts), "--rate", a.rate], capture_output=True, text=True)
    if up.returncode != 0:
        sys.exit(f"hybrid.py: netsim: {up.stderr.strip()}")
    runs = {l: [] for l in todo}
    try:
        for r in range(a.rounds):
            for l in todo:
                line = run(a, l, r)
                if line:
                    runs[l].append(line)
    finally:
        subprocess.run(["bash", NETSIM, "down"], capture_output=True)
    mib = 2 ** 20
    print(f"{a.model}, {a.ranks} ranks on {hosts} emulated hosts x {a.per_host} at {a.rate}, global batch "
          f"{a.global_batch}, {a.steps} steps, {a.rounds} rounds (medians)\n")
    print("| layout | samples/s (rounds) | median | model states, rank 0 | model states, largest other rank | peak, largest rank | tp sends per step (rank 0) |")
    print("|---|---|---|---|---|---|---|")
    for l, rs in runs.items():
        if not rs:
            print(f"| {slug(*l)} | failed | | | | | |")
            continue
        rates = [x["samples_per_s"] for x in rs]
        mem = rs[0]["memory_per_rank"]
        states = [m["parameters"] + m["gradients"] + m["optimizer_state"] for m in mem]
        peak = max(m["peak"] for m in mem)
        tp = rs[0].get("tp_bytes_sent_per_step")
        print(f"| {slug(*l)} | {', '.join(f'{x:.1f}' for x in rates)} | {statistics.median(rates):.1f} | "
              f"{states[0] / mib:.2f} MiB | {max(states[1:]) / mib:.2f} MiB | {peak / mib:.1f} MiB | {'-' if tp is None else f'{tp / mib:.1f} MiB'} |")


if __name__ == "__main__":
    main()
