#!/usr/bin/python3
"""Gradient compression (issue 12, part 2): every compressor against none, on the local backend
or across emulated hosts (scripts/netsim.sh), with PyTorch DDP's hooks as peers there.

  bench/compress.py [--rounds 2] [--epochs 3] [--workers 2] [--eval-every 117]
                    [--only none,onebit,...] [--dir /tmp/dtrain-compress] [--out-md FILE]
                    [--train-args "--lr 0.05 --momentum 0.9"] [--plot FILE.png]
                    [--hosts N --rate 100mbit] [--model gpt-small --max-steps 300 --target 2.3]

With --hosts N (root, needs network namespaces) the N workers are one rank per emulated host
(`scripts/netsim.sh up N --rate R`, brought up here and down at the end), dtrain runs as
`netsim.sh mpirun -np N -- dtrain train --backend mpi`, and the configurations torch-none,
torch-fp16 and torch-powersgd2 run ../shared/bench/torch_ddp_compress.py (DDP over Gloo, one
process per host; it evaluates only at the end, so its time to 85% is not measured).
--plot draws test accuracy against training seconds for every dtrain configuration (first round).

Runs `dtrain train --model mlp --workers W --epochs E --compress ...` (batch 64 per worker, one
thread per worker, ranks as threads) for each configuration in CONFIGS, rounds alternating the
configurations. Every --eval-every steps rank 0 copies the parameters (--eval-deferred; evaluated
after training, so evaluation never pauses training); time to 85% = time_s (training seconds) of
the first evaluation with test_accuracy >= 0.85, "-" when never reached. The table gives per
configuration the medians over rounds of: compressed bytes per step (what one rank hands to the
collectives), bytes sent per worker per step (measured by the communicator), samples/s, time to
85%, final accuracy.
Files: DIR/<slug>-r<round>.json (final line) and .jsonl (metrics).

--model gpt-small (any gpt-*) trains the language model on the KJV text instead, for
--max-steps steps with the model's own optimizer (AdamW; --train-args defaults to nothing),
and the target is a validation loss: time to target = time_s of the first evaluation with
val_loss <= --target (nats per byte); the last column is the final val_loss. The PyTorch
peers exist for mlp only.
"""
import argparse, json, os, shlex, statistics, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTRAIN = os.path.join(ROOT, "build", "dtrain")
NETSIM = os.path.join(ROOT, "scripts", "netsim.sh")
TORCH_PEER = os.path.join(os.path.dirname(ROOT), "shared", "bench", "torch_ddp_compress.py")
CONFIGS = {  # slug -> flags
    "none": "--compress none",
    "fp16": "--compress fp16",
    "bf16": "--compress bf16",
    "onebit": "--compress onebit",
    "signsgd": "--compress signsgd",
    "qsgd4": "--compress qsgd --compress-bits 4",
    "qsgd2": "--compress qsgd --compress-bits 2",
    "topk1": "--compress topk --compress-ratio 0.01",
    "randomk1": "--compress randomk --compress-ratio 0.01",
    "randomk10": "--compress randomk --compress-ratio 0.1",
    "powersgd2": "--compress powersgd --compress-rank 2",
    "powersgd4": "--compress powersgd --compress-rank 4",
    "onebit-2stage": "--compress onebit --compress-collective two-stage",
    "qsgd4-2stage": "--compress qsgd --compress-bits 4 --compress-collective two-stage",
    "topk1-2stage": "--compress topk --compress-ratio 0.01 --compress-collective two-stage",
}
# PyTorch DDP peers (--hosts only): slug -> torch_ddp_compress.py hook arguments.
TORCH = {"torch-none": "none", "torch-fp16": "fp16", "torch-powersgd2": "powersgd --r 2"}


def run_torch(a, slug, r):
    """One process per emulated host; rank 0's last line is the result."""
    procs = []
    for i in range(a.hosts):
        cmd = (f"{NETSIM} exec {i} -- env GLOO_SOCKET_IFNAME=eth0 /usr/bin/python3 {TORCH_PEER} mlp "
               f"{TORCH[slug]} --rank {i} --world-size {a.hosts} --master-addr 10.213.0.1 "
               f"--master-port {29555 + r} --epochs {a.epochs} --eval")
        print("+", cmd, file=sys.stderr, flush=True)
        procs.append(subprocess.Popen(shlex.split(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = [p.communicate() for p in procs]
    if any(p.returncode != 0 for p in procs):
        sys.exit(f"compress.py: {slug} failed: {' | '.join(e.strip()[-300:] for _, e in outs if e.strip())}")
    res = json.loads(outs[0][0].strip().splitlines()[-1])
    return {"compressed_bytes_per_step": res["comm_bytes_per_step_mean"], "bytes_sent_per_worker": None,
            "compression_ratio": res["grad_bytes"] / max(1, res["comm_bytes_per_step_mean"]),
            "samples_per_s": res["samples_per_s"], "test_accuracy": res["test_accuracy"], "time_to_85": None,
            "end_only": True, "seconds": res["seconds"]}


def is_lm(a):
    return a.model.startswith("gpt")


def reached(a, rec):
    """Whether an evaluation record meets the target (accuracy up, or validation loss down)."""
    if is_lm(a):
        return "val_loss" in rec and rec["val_loss"] <= a.target
    return "test_accuracy" in rec and rec["test_accuracy"] >= a.target


def run(a, slug, r):
    if slug in TORCH:
        return run_torch(a, slug, r)
    base = os.path.join(a.dir, f"{slug}-r{r}")
    length = f"--max-steps {a.max_steps}" if a.max_steps else f"--epochs {a.epochs}"
    flags = (f"--model {a.model} --workers {a.workers} {length} --progress off "
             f"--eval-every {a.eval_every} --eval-deferred --metrics {base}.jsonl --seed {r} "
             f"{a.train_args} {CONFIGS[slug]}")
    cmd = (f"{NETSIM} mpirun -np {a.hosts} -- {DTRAIN} train --backend mpi {flags}" if a.hosts
           else f"{DTRAIN} train {flags}")
    if os.path.exists(base + ".jsonl"):
        os.remove(base + ".jsonl")
    print("+", cmd, file=sys.stderr, flush=True)
    out = subprocess.run(shlex.split(cmd), capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"compress.py: {slug} failed: {out.stderr.strip()}")
    line = json.loads(out.stdout.strip().splitlines()[-1])
    t85 = None
    with open(base + ".jsonl") as f:
        for rec in map(json.loads, f):
            if "time_s" in rec and reached(a, rec):
                t85 = rec["time_s"] if t85 is None else min(t85, rec["time_s"])
    line["time_to_85"] = t85
    with open(base + ".json", "w") as f:
        json.dump(line, f)
    return line


def plot(a, slugs, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=120)
    key = "val_loss" if is_lm(a) else "test_accuracy"
    for s in slugs:
        with open(os.path.join(a.dir, f"{s}-r0.jsonl")) as f:
            pts = [(rec["time_s"], rec[key]) for rec in map(json.loads, f)
                   if key in rec and "time_s" in rec]
        if pts:
            ax.plot(*zip(*sorted(pts)), marker=".", label=s)
    ax.axhline(a.target, color="grey", lw=0.8, ls="--")
    ax.set_xscale("log")
    ax.set_xlabel("training seconds (log)")
    ax.set_ylabel("validation loss (nats per byte)" if is_lm(a) else "test accuracy")
    where = f"{a.hosts} emulated hosts at {a.rate}" if a.hosts else f"{a.workers} local workers"
    what = f"{a.model}, KJV: time to validation loss" if is_lm(a) else f"{a.model}, Fashion-MNIST: time to accuracy"
    ax.set_title(f"{what} per compressor, {where}")
    if not is_lm(a):
        ax.set_ylim(0.6, 0.9)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(path)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--eval-every", type=int, default=117)
    p.add_argument("--only", default=",".join(CONFIGS))
    p.add_argument("--dir", default="/tmp/dtrain-compress")
    p.add_argument("--out-md")
    p.add_argument("--train-args", help='extra dtrain flags (default "--lr 0.05 --momentum 0.9" for mlp, none for gpt)')
    p.add_argument("--model", default="mlp", help="mlp, lenet, or gpt-tiny|small|base (a validation-loss target)")
    p.add_argument("--max-steps", type=int, default=0, help="train this many steps instead of --epochs")
    p.add_argument("--target", type=float, help="test accuracy (default 0.85) or, for gpt, val_loss (default 2.3)")
    p.add_argument("--hosts", type=int, default=0, help="emulated hosts, one rank each (0: local backend)")
    p.add_argument("--rate", default="1gbit", help="--hosts: link rate (tbf), e.g. 100mbit")
    p.add_argument("--plot", help="time-to-accuracy plot of the first round (PNG)")
    a = p.parse_args()
    if a.plot:
        try:
            import matplotlib  # noqa: F401 (checked before hours of runs, not after)
        except ImportError:
            sys.exit("compress.py: --plot needs matplotlib (apt-get install python3-matplotlib)")
    if a.train_args is None:
        a.train_args = "" if is_lm(a) else "--lr 0.05 --momentum 0.9"
    if a.target is None:
        a.target = 2.3 if is_lm(a) else 0.85
    slugs = a.only.split(",")
    if is_lm(a) and any(s in TORCH for s in slugs):
        sys.exit("compress.py: the PyTorch DDP peers train mlp only")
    for s in slugs:
        if s not in CONFIGS and not (a.hosts and s in TORCH):
            known = list(CONFIGS) + (list(TORCH) if a.hosts else [])
            sys.exit(f"compress.py: unknown configuration {s} (known: {', '.join(known)})")
    if a.hosts:
        a.workers = a.hosts
        up = subprocess.run([NETSIM, "up", str(a.hosts), "--rate", a.rate], capture_output=True, text=True)
        if up.returncode != 0:
            sys.exit(f"compress.py: netsim: {up.stderr.strip()}")
    os.makedirs(a.dir, exist_ok=True)
    res = {s: [] for s in slugs}
    try:
        for r in range(a.rounds):
            for s in slugs:
                res[s].append(run(a, s, r))
    finally:
        if a.hosts:
            subprocess.run([NETSIM, "down"], capture_output=True)
    med = lambda xs: statistics.median(xs) if xs else None
    goal = f"val_loss {a.target}" if is_lm(a) else f"{a.target:.0%}"
    final = "final val_loss" if is_lm(a) else "final accuracy"
    rows = [f"| compress | bytes/step | sent/worker/step | ratio | samples/s | time to {goal} (s) | {final} |",
            "|---|---|---|---|---|---|---|"]
    ref = med([x["samples_per_s"] for x in res.get("none", [])])
    for s in slugs:
        xs = res[s]
        t = [x["time_to_85"] for x in xs if x["time_to_85"] is not None]
        sps = med([x["samples_per_s"] for x in xs])
        sent = [x["bytes_sent_per_worker"] for x in xs if x["bytes_sent_per_worker"] is not None]
        name = f"PyTorch DDP, hook {TORCH[s]}" if s in TORCH else f"`{CONFIGS[s]}`"
        t85 = ("(end only)" if xs[0].get("end_only") else
               f"{med(t):.1f} ({len(t)}/{len(xs)})" if t else f"- (0/{len(xs)})")
        rows.append(f"| {name} | {med([x['compressed_bytes_per_step'] for x in xs]):,.0f} | "
                    + (f"{med(sent):,.0f}" if sent else "") + " | "
                    f"{med([x['compression_ratio'] for x in xs]):.1f}x | {sps:,.0f}"
                    + (f" ({sps / ref:.2f}x)" if ref else "") + " | " + t85 + " | "
                    f"{med([x['val_loss' if is_lm(a) else 'test_accuracy'] for x in xs]):.4f} |")
    table = "\n".join(rows)
    print(table)
    if a.plot:
        plot(a, [s for s in slugs if s in CONFIGS], a.plot)
    if a.out_md:
        with open(a.out_md, "w") as f:
            f.write(table + "\n")


if __name__ == "__main__":
    main()
