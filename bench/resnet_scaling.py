#!/usr/bin/python3
"""resnet-20 data parallelism on emulated hosts (issue 31): samples/s per host count at 1 and 10
Gbit/s, flat (ring) against hierarchical allreduce, with and without fp16 compression.

  flock /tmp/netsim.lock bench/resnet_scaling.py [--rates 1gbit,10gbit] [--layouts 1x2,2x2,4x2]
                                                 [--batch 64] [--steps 20] [--rounds 1]
                                                 [--out bench/resnet_scaling.jsonl]
  bench/resnet_scaling.py --table bench/resnet_scaling.jsonl
  bench/resnet_scaling.py --extrapolate bench/machines/zen4-resnet20-netsim4-1gbit.json [--hosts-up-to 64]

Weak scaling, as the notes' curves: every rank trains on --batch samples per step, so the global
batch grows with the ranks. Layout HxR: H emulated hosts (`scripts/netsim.sh`, one network
namespace each, `tbf`-shaped links) with R ranks each, mpi backend, 1 intra-op thread per rank.
Per layout and rate: `--allreduce-algo ring` (flat: one ring over every rank) and `hier` (in-host
reduce over shared memory, the hosts' leaders' allreduce, in-host broadcast), each with
`--compress none` and `fp16`; a single process (1x1) is the baseline. Every host shares this
machine's cores, so a layout with more ranks than cores oversubscribes them: read the step's
exposed communication (`exposed_comm_ms`, measured) for what the network costs, and samples/s
against the same layout's compute-only bound (ranks x batch / compute_ms).
--extrapolate: what these cores would do as real hosts (each with its own 2 cores, so nothing
oversubscribed), from `dtrain simulate`: the calibrated machine file's compute and resnet-20 times
(`dtrain calibrate --models resnet-20 --micro-batches 64 --netsim 4 --rate 1gbit`), its shared
cores and emulated-host collective fits dropped, and the host links set to 1 and 10 Gbit/s
(the emulated 1 Gbit/s link's measured 119 MB/s, and 10x that; 50 and 20 us latency).
Each run appends one JSON line to --out (rows already there are skipped; `--rounds N` repeats
each configuration N times, alternating, for medians).
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys

from study_runs import append_row, rows

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NETSIM = os.path.join(ROOT, "scripts", "netsim.sh")
ALGOS = ["ring", "hier"]
COMPRESS = ["none", "fp16"]


def train_args(dtrain, n, batch, steps, algo, compress):
    args = [dtrain, "train", "--model", "resnet-20", "--batch-size", str(batch), "--max-steps", str(steps),
            "--threads", "1", "--progress", "off", "--seed", "0", "--lr", "0.1", "--momentum", "0.9",
            "--weight-decay", "5e-4"]
    if n > 1:
        args += ["--backend", "mpi", "--workers", str(n), "--allreduce-algo", algo, "--compress", compress]
    return args


def configs(layouts, rates):
    """(rate, H, R, algo, compress) of every run, the 1x1 baseline first; one host needs no rate."""
    out = [("-", 1, 1, "-", "none")]
    for rate in rates:
        for h, r in layouts:
            if h == 1 and rate != rates[0]:
                continue
            for algo in ALGOS:
                if r == 1 and algo == "hier":
                    continue  # one rank per host: hier is the leaders' allreduce alone
                for compress in COMPRESS:
                    out.append(("-" if h == 1 else rate, h, r, algo, compress))
    return out


def key(row):
    return (row["rate"], row["hosts"], row["ranks_per_host"], row["algo"], row["compress"], row["round"])


def run(a):
    layouts = [tuple(int(x) for x in l.split("x")) for l in a.layouts.split(",")]
    rates = a.rates.split(",")
    seen = {key(r) for r in rows(a.out)}
    for rnd in range(a.rounds):
        for rate in rates:
            todo = [c for c in configs(layouts, rates) if c[0] in ("-", rate)
                    and (c[0] != "-" or rate == rates[0])
                    and (c[0], c[1], c[2], c[3], c[4], rnd) not in seen]
            if not todo:
                continue
            hosts = max(c[1] for c in todo)
            up = subprocess.run([NETSIM, "up", str(max(hosts, 1)), "--rate", rate], capture_output=True, text=True)
            if up.returncode != 0:
                sys.exit(f"resnet_scaling.py: netsim: {up.stderr.strip()}")
            try:
                for crate, h, r, algo, compress in todo:
                    n = h * r
                    args = train_args(a.dtrain, n, a.batch, a.steps, algo, compress)
                    if n > 1:
                        args = [NETSIM, "mpirun", "-np", str(n), "--ranks-per-host", str(r), "--"] + args
                    print("+", " ".join(shlex.quote(x) for x in args), file=sys.stderr, flush=True)
                    p = subprocess.run(args, capture_output=True, text=True)
                    if p.returncode != 0:
                        sys.exit(f"resnet_scaling.py: {h}x{r} {algo} {compress} at {rate} failed: "
                                 f"{p.stderr.strip()[-800:]}")
                    res = json.loads(p.stdout.strip().splitlines()[-1])
                    row = {"rate": crate, "hosts": h, "ranks_per_host": r, "algo": algo, "compress": compress,
                           "round": rnd, "batch_per_rank": a.batch, "steps": a.steps,
                           "samples_per_s": res["samples_per_s"], "compute_ms": res.get("compute_ms"),
                           "comm_ms": res.get("comm_ms"), "exposed_comm_ms": res.get("exposed_comm_ms"),
                           "bytes_sent_per_worker": res.get("bytes_sent_per_worker"),
                           "command": " ".join(args[args.index(a.dtrain):] if a.dtrain in args else args)}
                    append_row(a.out, row)
                    print(f"  {h}x{r} {algo} {compress} {crate}: {row['samples_per_s']:.0f} samples/s, "
                          f"exposed comm {row['exposed_comm_ms'] or 0:.1f} ms", file=sys.stderr, flush=True)
            finally:
                subprocess.run([NETSIM, "down"], capture_output=True)


def table(path):
    groups = {}
    for r in rows(path):
        groups.setdefault((r["rate"], r["hosts"], r["ranks_per_host"], r["algo"], r["compress"]), []).append(r)
    med = {k: {f: statistics.median(x[f] or 0 for x in v) for f in
               ("samples_per_s", "compute_ms", "exposed_comm_ms", "bytes_sent_per_worker")} | {"n": len(v)}
           for k, v in groups.items()}
    base = med.get(("-", 1, 1, "-", "none"))
    print("| link | hosts x ranks | allreduce | compress | samples/s | x 1 process | compute-bound samples/s "
          "| exposed comm ms/step | bytes sent per rank and step | runs |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    def rate_bits(rate):  # "-" (one host) first, then by speed: "1gbit" before "10gbit"
        units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
        return next((float(rate[:-len(u)]) * f for u, f in units.items() if rate.endswith(u)), 0.0)

    for k in sorted(med, key=lambda k: (rate_bits(k[0]), k[1] * k[2], k[1], k[3], k[4])):
        rate, h, r, algo, compress = k
        m = med[k]
        n = h * r
        batch = next(x["batch_per_rank"] for x in groups[k])
        bound = f"{n * batch / (m['compute_ms'] / 1e3):.0f}" if m["compute_ms"] else ""
        per_step = (m["bytes_sent_per_worker"] or 0) if n > 1 else 0  # per step already
        ratio = f"{m['samples_per_s'] / base['samples_per_s']:.2f}x" if base else ""
        print(f"| {rate} | {h}x{r} | {algo} | {compress} | {m['samples_per_s']:.0f} | {ratio} | {bound} | "
              f"{m['exposed_comm_ms']:.1f} | {per_step / 1e6:.2f} MB | {m['n']} |")


def extrapolate(machine_path, dtrain, batch, hosts_up_to):
    import tempfile
    with open(machine_path) as f:
        calibrated = json.load(f)
    links = {"1gbit": (119e6, 50e-6), "10gbit": (1.19e9, 20e-6)}
    hosts = [h for h in (1, 2, 4, 8, 16, 32, 64) if h <= hosts_up_to]
    tmp = tempfile.mkdtemp(prefix="resnet-scaling-")
    single = None
    print("| link | hosts x 2 ranks | allreduce | compress | predicted samples/s | per host | scaling efficiency "
          "| exposed comm ms/step | dominant |")
    print("|---|---|---|---|---|---|---|---|---|")
    for rate, (bw, alpha) in links.items():
        m = {k: v for k, v in calibrated.items() if k not in ("shared_cores", "collectives", "hosts")}
        m["name"] = f"hypothetical: hosts of {calibrated['devices_per_host']} cores, {rate}"
        m["links"] = dict(calibrated["links"], inter_host={"alpha_s": alpha, "bytes_per_s": bw})
        mpath = os.path.join(tmp, f"{rate}.json")
        with open(mpath, "w") as f:
            json.dump(m, f)
        for h in hosts:
            for algo in ALGOS:
                for compress in COMPRESS:
                    n = 2 * h
                    args = train_args(dtrain, n, batch, 20, algo, compress)
                    conf = subprocess.run(args + ["--print-config"], capture_output=True, text=True, check=True)
                    cpath = os.path.join(tmp, "run.toml")
                    with open(cpath, "w") as f:
                        f.write(conf.stdout)
                    p = subprocess.run([dtrain, "simulate", "--config", cpath, "--machine", mpath, "--hosts", str(h)],
                                       capture_output=True, text=True)
                    if p.returncode != 0:
                        sys.exit(f"resnet_scaling.py: simulate {h}x2 {algo} {compress}: {p.stderr.strip()}")
                    r = json.loads(p.stdout.strip().splitlines()[-1])
                    if single is None:
                        single = r["samples_per_s"] / 2  # one host's 2 ranks with no network: the per-rank rate
                    eff = r["samples_per_s"] / (n * single)
                    print(f"| {rate} | {h}x2 | {algo} | {compress} | {r['samples_per_s']:.0f} | "
                          f"{r['samples_per_s'] / h:.0f} | {eff:.0%} | {1e3 * r['exposed_comm_s']:.1f} | "
                          f"{r['dominant']} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtrain", default=os.path.join(ROOT, "build", "dtrain"))
    ap.add_argument("--rates", default="1gbit,10gbit")
    ap.add_argument("--layouts", default="1x2,2x2,4x2")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "resnet_scaling.jsonl"))
    ap.add_argument("--table", metavar="JSONL", help="print the markdown table of finished runs")
    ap.add_argument("--extrapolate", metavar="MACHINE", help="simulate real hosts from a calibrated machine file")
    ap.add_argument("--hosts-up-to", type=int, default=64)
    a = ap.parse_args()
    if a.extrapolate:
        extrapolate(a.extrapolate, a.dtrain, a.batch, a.hosts_up_to)
    elif a.table:
        table(a.table)
    else:
        run(a)


if __name__ == "__main__":
    main()
