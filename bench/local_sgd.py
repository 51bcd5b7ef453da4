#!/usr/bin/python3
"""Local SGD / DiLoCo / gossip SGD against synchronous allreduce across emulated hosts.

Brings up `scripts/netsim.sh up HOSTS --rate RATE` (and down at the end; hold
/tmp/netsim.lock around it: `flock /tmp/netsim.lock bench/local_sgd.py ...`),
runs each configuration as `netsim.sh mpirun -np HOSTS -- dtrain train --backend
mpi`, evaluating every --eval-every steps (deferred: evaluation never pauses a
worker; a multiple of every H, so each evaluation sees a synced model), and
appends one CSV row per run: time to the target (training seconds of the first
evaluation at or past it), the final metric, bytes sent per worker, syncs.

  mlp:  bench/local_sgd.py --rate 100mbit --only allreduce,h1,h4,h16,h64
  gpt:  bench/local_sgd.py --rate 100mbit --model gpt-tiny --only allreduce-adamw,diloco50 ...
  gossip: bench/local_sgd.py --rate 100mbit --only allreduce,h4,gossip-ring,gossip-ring-k4,gossip-exp --csv /tmp/gossip.csv

--plot PNG --runs LABEL=METRICS.jsonl,... draws the evaluations of finished runs
(their --metrics files: these runs' or any `dtrain train --metrics` of local SGD
or allreduce) against the bytes rank 0 had sent (`bytes_sent_total` of the
training records, interpolated to each evaluation's step) and against training
seconds; nothing is run.
"""
import argparse, csv, json, os, shlex, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NETSIM = os.path.join(ROOT, "scripts", "netsim.sh")
DTRAIN = os.path.join(ROOT, "build", "dtrain")

CONFIGS = {
    "allreduce": "--strategy allreduce",
    "h1": "--strategy local-sgd --sync-every 1",
    "h4": "--strategy local-sgd --sync-every 4",
    "h16": "--strategy local-sgd --sync-every 16",
    "h64": "--strategy local-sgd --sync-every 64",
    "post64-h16": "--strategy local-sgd --sync-every 16 --local-sgd-start-step 64",
    "allreduce-adamw": "--strategy allreduce",
    "diloco50": "--strategy local-sgd --sync-every 50 --outer-optimizer nesterov --outer-lr 0.7 --outer-momentum 0.9",
    "avg50": "--strategy local-sgd --sync-every 50",
    # Decentralized SGD (docs/guide/gossip.md): neighbours on a graph, no allreduce of the model.
    "gossip-ring": "--strategy gossip --topology ring",
    "gossip-ring-k4": "--strategy gossip --topology ring --gossip-every 4",
    "gossip-exp": "--strategy gossip --topology exponential",
    "gossip-exp-k4": "--strategy gossip --topology exponential --gossip-every 4",
}
# PyTorch's PeriodicModelAverager (bench/torch_local_sgd.py, mlp only): slug -> period.
TORCH = {"torch-h4": 4, "torch-h16": 16, "torch-h64": 64}
TORCH_PEER = os.path.join(ROOT, "bench", "torch_local_sgd.py")


def run_torch(a, slug, port):
    """One process per emulated host; rank 0's last line is the result. Evaluates at the end only."""
    procs = []
    for i in range(a.hosts):
        cmd = (f"{NETSIM} exec {i} -- env GLOO_SOCKET_IFNAME=eth0 /usr/bin/python3 {TORCH_PEER} "
               f"--period {TORCH[slug]} --rank {i} --world-size {a.hosts} --master-addr 10.213.0.1 "
               f"--master-port {port} --epochs {a.torch_epochs}")
        print("+", cmd, file=sys.stderr, flush=True)
        procs.append(subprocess.Popen(shlex.split(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = [p.communicate() for p in procs]
    if any(p.returncode != 0 for p in procs):
        sys.exit(f"local_sgd.py: {slug} failed: {' | '.join(e.strip()[-300:] for _, e in outs if e.strip())}")
    res = json.loads(outs[0][0].strip().splitlines()[-1])
    return {"model": "mlp", "rate": a.rate, "hosts": a.hosts, "config": slug,
            "flags": f"torch_local_sgd.py --period {TORCH[slug]}", "steps": res["steps"], "seconds": res["seconds"],
            "samples_per_s": res["samples_per_s"], f"time_to_{a.target}": None, "final": res["test_accuracy"],
            "bytes_sent_per_worker": None, "bytes_per_sample": None, "syncs": res["syncs"]}


def curve(path):
    """(steps, metric name, values, seconds, bytes sent by rank 0) of a --metrics file's evaluations."""
    sent, evals = [(0, 0.0)], []
    with open(path) as f:
        for rec in map(json.loads, f):
            if "bytes_sent_total" in rec:
                sent.append((rec["step"], rec["bytes_sent_total"]))
            elif "time_s" in rec and ("val_loss" in rec or "test_accuracy" in rec):
                evals.append(rec)
    if not evals:
        sys.exit(f"local_sgd.py: {path} has no evaluations (train with --eval-every N --metrics FILE)")
    key = "val_loss" if "val_loss" in evals[0] else "test_accuracy"
    sent.sort()

    def bytes_at(step):  # linear between the logged steps; past the last, at its rate
        for (s0, b0), (s1, b1) in zip(sent, sent[1:]):
            if step <= s1:
                return b0 + (b1 - b0) * (step - s0) / max(1, s1 - s0)
        s1, b1 = sent[-1]
        return b1 * step / max(1, s1)

    steps = [r["step"] for r in evals]
    return steps, key, [r[key] for r in evals], [r["time_s"] for r in evals], [bytes_at(s) for s in steps]


def plot(png, runs, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (by_bytes, by_time) = plt.subplots(1, 2, figsize=(11, 4.2))
    key = None
    for spec in runs.split(","):
        label, _, path = spec.rpartition("=")
        if not path:
            sys.exit(f"local_sgd.py: --runs wants LABEL=FILE, got '{spec}'")
        steps, key, values, seconds, sent = curve(path)
        by_bytes.plot([b / 1e6 for b in sent], values, marker="o", ms=3, label=label)
        by_time.plot(seconds, values, marker="o", ms=3, label=label)
    by_bytes.set_xscale("log")
    by_bytes.set_xlabel("MB sent by rank 0 (log)")
    by_time.set_xlabel("training seconds")
    for ax in (by_bytes, by_time):
        ax.set_ylabel(key)
        ax.grid(alpha=0.3)
    by_time.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    print(f"wrote {png}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--plot", metavar="PNG", help="plot --runs instead of running anything")
    p.add_argument("--runs", default="", help="with --plot: LABEL=METRICS.jsonl,... (the last = splits)")
    p.add_argument("--title", default="", help="with --plot: the figure's title")
    p.add_argument("--hosts", type=int, default=4)
    p.add_argument("--rate", default="100mbit")
    p.add_argument("--model", default="mlp")
    p.add_argument("--only", default="allreduce,h1,h4,h16,h64")
    p.add_argument("--train-args", default="--batch-size 64 --epochs 3 --lr 0.05 --momentum 0.9 --schedule cosine")
    p.add_argument("--eval-every", type=int, default=64)
    p.add_argument("--target", type=float, default=0.85, help="test accuracy (mlp) or val_loss (gpt)")
    p.add_argument("--dir", default="/tmp/local_sgd_bench")
    p.add_argument("--torch-epochs", type=int, default=3, help="epochs of the PyTorch peer runs")
    p.add_argument("--csv", default=os.path.join(ROOT, "bench", "local_sgd.csv"))
    a = p.parse_args()
    if a.plot:
        return plot(a.plot, a.runs, a.title)
    lm = a.model.startswith("gpt")
    os.makedirs(a.dir, exist_ok=True)
    up = subprocess.run([NETSIM, "up", str(a.hosts), "--rate", a.rate], capture_output=True, text=True)
    if up.returncode != 0:
        sys.exit(f"local_sgd.py: netsim: {up.stderr.strip()}")
    rows = []
    try:
        for k, slug in enumerate(a.only.split(",")):
            if slug in TORCH:
                row = run_torch(a, slug, 29570 + k)
                print(json.dumps(row), flush=True)
                rows.append(row)
                continue
            base = os.path.join(a.dir, f"{a.model}-{a.rate}-{slug}")
            flags = (f"--model {a.model} --workers {a.hosts} --progress off --eval-every {a.eval_every} "
                     f"--eval-deferred --metrics {base}.jsonl {a.train_args} {CONFIGS[slug]}")
            cmd = f"{NETSIM} mpirun -np {a.hosts} -- {DTRAIN} train --backend mpi {flags}"
            if os.path.exists(base + ".jsonl"):
                os.remove(base + ".jsonl")
            print("+", cmd, file=sys.stderr, flush=True)
            out = subprocess.run(shlex.split(cmd), capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit(f"local_sgd.py: {slug} failed: {out.stderr.strip()[-2000:]}")
            line = json.loads(out.stdout.strip().splitlines()[-1])
            key = "val_loss" if lm else "test_accuracy"
            hit = None
            with open(base + ".jsonl") as f:
                for rec in map(json.loads, f):
                    if "time_s" in rec and key in rec and (rec[key] <= a.target if lm else rec[key] >= a.target):
                        hit = rec["time_s"] if hit is None else min(hit, rec["time_s"])
            steps = line["steps"]
            samples = steps * line["global_batch"]
            per = "token" if lm else "sample"
            units = samples * (line.get("block_size", 1) if lm else 1)
            sent = line.get("bytes_sent_total", 0.0)
            row = {"model": a.model, "rate": a.rate, "hosts": a.hosts, "config": slug, "flags": CONFIGS[slug],
                   "steps": steps, "seconds": round(line["seconds"], 2),
                   "samples_per_s": round(line["samples_per_s"], 1),
                   f"time_to_{a.target}": None if hit is None else round(hit, 2),
                   "final": round(line.get(key, float("nan")), 4),
                   "bytes_sent_per_worker": int(sent),
                   f"bytes_per_{per}": round(sent / max(1, units), 2),
                   "syncs": line.get("syncs", steps)}
            print(json.dumps(row), flush=True)
            rows.append(row)
    finally:
        subprocess.run([NETSIM, "down"], capture_output=True)
    new = not os.path.exists(a.csv)
    with open(a.csv, "a", newline="") as f:
        for r in rows:
            w = csv.writer(f)
            if new:
                w.writerow(["model", "rate", "hosts", "config", "flags", "steps", "seconds", "samples_per_s",
                            "target", "time_to_target_s", "final", "bytes_sent_per_worker", "bytes_per_unit", "syncs"])
                new = False
            vals = list(r.values())
            w.writerow(vals[:8] + [a.target] + vals[8:])


if __name__ == "__main__":
    main()
