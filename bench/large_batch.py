#!/usr/bin/env python3
"""The large-batch rules on resnet-20 (Goyal et al. 2017, You et al. 2017's structure).

A fixed budget of epochs of Fashion-MNIST, global batch 128 .. 8192 made of
micro-batches of 128 (`--accumulate B/128`: what workers x batch x accumulate
computes, with BatchNorm statistics per 128 samples as per-replica BN under
data parallelism), and per batch:
  base     SGD (momentum 0.9, weight decay 5e-4) at the base lr 0.1, cosine
  scaled   the linear scaling rule: lr 0.1 x B/128 (--scale-lr)
  warmup   scaled, plus a linear warmup over the first half epoch
  lars     LARS (trust coefficient 0.001) at the scaled lr, with the warmup
  lamb     LAMB (weight decay 0.01) at 0.002 x sqrt(B/128), with the warmup
Each run appends one JSON line to --out; runs already there are skipped, so the
study can be stopped and continued (results are deterministic: the seed fixes
initialization, shuffling and every micro-batch).

  /usr/bin/python3 bench/large_batch.py --epochs 3 --out bench/large_batch.jsonl
  /usr/bin/python3 bench/large_batch.py --table bench/large_batch.jsonl   # markdown + plot
"""
import argparse
import json
import math
import sys

from study_runs import append_row, rows, run_dtrain

TRAIN_SAMPLES = 60000
MICRO = 128
METHODS = ["base", "scaled", "warmup", "lars", "lamb"]


def command(dtrain, batch, method, epochs, threads):
    k = batch // MICRO
    steps = epochs * (TRAIN_SAMPLES // batch)
    warmup = max(1, (TRAIN_SAMPLES // batch) // 2)
    args = [dtrain, "train", "--model", "resnet-20", "--batch-size", str(MICRO), "--accumulate", str(k),
            "--epochs", str(epochs), "--max-steps", str(steps), "--schedule", "cosine", "--seed", "0",
            "--threads", str(threads), "--progress", "off"]
    if method == "base":
        args += ["--optimizer", "sgd", "--lr", "0.1", "--momentum", "0.9", "--weight-decay", "5e-4"]
    elif method == "scaled":
        args += ["--optimizer", "sgd", "--lr", "0.1", "--scale-lr", "--momentum", "0.9", "--weight-decay", "5e-4"]
    elif method == "warmup":
        args += ["--optimizer", "sgd", "--lr", "0.1", "--scale-lr", "--momentum", "0.9", "--weight-decay", "5e-4",
                 "--warmup-steps", str(warmup)]
    elif method == "lars":
        args += ["--optimizer", "lars", "--lr", "0.1", "--scale-lr", "--momentum", "0.9", "--weight-decay", "5e-4",
                 "--warmup-steps", str(warmup)]
    elif method == "lamb":
        args += ["--optimizer", "lamb", "--lr", f"{0.002 * math.sqrt(k):.6g}", "--weight-decay", "0.01",
                 "--warmup-steps", str(warmup)]
    else:
        raise SystemExit(f"large_batch.py: unknown method '{method}' ({', '.join(METHODS)})")
    return args, steps


def done(path):
    return {(r["global_batch"], r["method"], r["epochs"]) for r in rows(path)}


def run(a):
    order = [(128, "base")] + [(b, m) for b in (8192, 2048, 512) for m in METHODS] + \
            [(128, "lars"), (128, "lamb")]
    wanted = {int(b) for b in a.batches.split(",")}
    methods = a.methods.split(",")
    for m in methods:
        if m not in METHODS:
            raise SystemExit(f"large_batch.py: unknown method '{m}' ({', '.join(METHODS)})")
    seen = done(a.out)
    for batch, method in order:
        if batch not in wanted or method not in methods or (batch, method, a.epochs) in seen:
            continue
        args, steps = command(a.dtrain, batch, method, a.epochs, a.threads)
        print(f"large_batch: batch {batch} {method}: {steps} steps: {' '.join(args)}", file=sys.stderr, flush=True)
        if a.dry_run:
            continue
        res, seconds = run_dtrain(args, f"batch {batch} {method}", "large_batch.py")
        row = {"global_batch": batch, "method": method, "epochs": a.epochs, "steps": res["steps"],
               "effective_lr": res.get("effective_lr"), "test_accuracy": res["test_accuracy"],
               "test_loss": res["test_loss"], "train_loss": res["train_loss"],
               "seconds": seconds, "command": " ".join(args[1:])}
        append_row(a.out, row)
        print(f"large_batch: batch {batch} {method}: accuracy {row['test_accuracy']:.4f} "
              f"({row['seconds']} s)", file=sys.stderr, flush=True)


def table(path, plot):
    found = rows(path)
    batches = sorted({r["global_batch"] for r in found})
    by = {(r["global_batch"], r["method"]): r for r in found}
    print("| global batch (steps) | " + " | ".join(METHODS) + " |")
    print("|---|" + "---|" * len(METHODS))
    for b in batches:
        steps = next(r["steps"] for r in found if r["global_batch"] == b)
        cells = []
        for m in METHODS:
            r = by.get((b, m)) or (by.get((b, "base")) if b == MICRO and m in ("scaled",) else None)
            cells.append(f"{r['test_accuracy']:.4f}" if r else "")
        print(f"| {b} ({steps}) | " + " | ".join(cells) + " |")
    if plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 4))
        for m in METHODS:
            pts = [(b, by[(b, m)]["test_accuracy"]) for b in batches if (b, m) in by]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=m)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("global batch")
        ax.set_ylabel("test accuracy")
        ax.set_title(f"resnet-20, Fashion-MNIST, {found[0]['epochs']} epochs")
        ax.legend()
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(plot, dpi=110)
        print(f"wrote {plot}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtrain", default="build/dtrain")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batches", default="128,512,2048,8192")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default="bench/large_batch.jsonl")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--table", metavar="JSONL", help="print the markdown table of a finished study")
    ap.add_argument("--plot", metavar="PNG", help="with --table: also plot accuracy vs batch")
    a = ap.parse_args()
    if a.table:
        table(a.table, a.plot)
    else:
        run(a)


if __name__ == "__main__":
    main()
