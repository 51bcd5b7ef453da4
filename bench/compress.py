#!/usr/bin/python3
"""Gradient compression (issue 12, part 2) on the local backend: every compressor against none.

  bench/compress.py [--rounds 2] [--epochs 3] [--workers 2] [--eval-every 117]
                    [--only none,onebit,...] [--dir /tmp/dtrain-compress] [--out-md FILE]
                    [--train-args "--lr 0.05 --momentum 0.9"]

Runs `dtrain train --model mlp --workers W --epochs E --compress ...` (batch 64 per worker, one
thread per worker, ranks as threads) for each configuration in CONFIGS, rounds alternating the
configurations. Every --eval-every steps rank 0 copies the parameters (--eval-deferred; evaluated
after training, so evaluation never pauses training); time to 85% = time_s (training seconds) of
the first evaluation with test_accuracy >= 0.85, "-" when never reached. The table gives per
configuration the medians over rounds of: compressed bytes per step (what one rank hands to the
collectives), bytes sent per worker per step (measured by the communicator), samples/s, time to
85%, final accuracy.
Files: DIR/<slug>-r<round>.json (final line) and .jsonl (metrics).
"""
import argparse, json, os, shlex, statistics, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTRAIN = os.path.join(ROOT, "build", "dtrain")
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
}


def run(a, slug, r):
    base = os.path.join(a.dir, f"{slug}-r{r}")
    cmd = (f"{DTRAIN} train --model mlp --workers {a.workers} --epochs {a.epochs} --progress off "
           f"--eval-every {a.eval_every} --eval-deferred --metrics {base}.jsonl --seed {r} "
           f"{a.train_args} {CONFIGS[slug]}")
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
            if "test_accuracy" in rec and "time_s" in rec and rec["test_accuracy"] >= 0.85:
                t85 = rec["time_s"] if t85 is None else min(t85, rec["time_s"])
    line["time_to_85"] = t85
    with open(base + ".json", "w") as f:
        json.dump(line, f)
    return line


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--eval-every", type=int, default=117)
    p.add_argument("--only", default=",".join(CONFIGS))
    p.add_argument("--dir", default="/tmp/dtrain-compress")
    p.add_argument("--out-md")
    p.add_argument("--train-args", default="--lr 0.05 --momentum 0.9")
    a = p.parse_args()
    slugs = a.only.split(",")
    for s in slugs:
        if s not in CONFIGS:
            sys.exit(f"compress.py: unknown configuration {s} (known: {', '.join(CONFIGS)})")
    os.makedirs(a.dir, exist_ok=True)
    res = {s: [] for s in slugs}
    for r in range(a.rounds):
        for s in slugs:
            res[s].append(run(a, s, r))
    med = lambda xs: statistics.median(xs) if xs else None
    rows = ["| compress | bytes/step | sent/worker/step | ratio | samples/s | time to 85% (s) | final accuracy |",
            "|---|---|---|---|---|---|---|"]
    ref = med([x["samples_per_s"] for x in res.get("none", [])])
    for s in slugs:
        xs = res[s]
        t = [x["time_to_85"] for x in xs if x["time_to_85"] is not None]
        sps = med([x["samples_per_s"] for x in xs])
        rows.append(f"| `{CONFIGS[s]}` | {med([x['compressed_bytes_per_step'] for x in xs]):,.0f} | "
                    f"{med([x['bytes_sent_per_worker'] for x in xs]):,.0f} | "
                    f"{med([x['compression_ratio'] for x in xs]):.1f}x | {sps:,.0f}"
                    + (f" ({sps / ref:.2f}x)" if ref else "") + " | "
                    + (f"{med(t):.1f} ({len(t)}/{len(xs)})" if t else f"- (0/{len(xs)})") + " | "
                    f"{med([x['test_accuracy'] for x in xs]):.4f} |")
    table = "\n".join(rows)
    print(table)
    if a.out_md:
        with open(a.out_md, "w") as f:
            f.write(table + "\n")


if __name__ == "__main__":
    main()
