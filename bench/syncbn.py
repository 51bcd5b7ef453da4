#!/usr/bin/env python3
"""SyncBN against per-replica BatchNorm at small per-replica batches (issue 31).

resnet-20 on Fashion-MNIST, 8 data-parallel replicas (ranks as threads of one
process, --threads auto: the cores shared among them) of B = 4, 8, 16 samples
each, with and without --sync-bn (BatchNorm statistics over all 8 x B samples,
as torch.nn.SyncBatchNorm), SGD lr 0.1 x (8 B / 128) (the linear scaling rule
from the 128-sample reference), momentum 0.9, weight decay 5e-4, cosine, a
fixed number of epochs. Each run appends one JSON line to --out (test accuracy,
samples/s, step time); runs already there are skipped.

  /usr/bin/python3 bench/syncbn.py --epochs 1 --out bench/syncbn.jsonl
  /usr/bin/python3 bench/syncbn.py --table bench/syncbn.jsonl
"""
import argparse
import sys

from study_runs import append_row, rows, run_dtrain

REPLICAS = 8


def command(dtrain, batch, sync, epochs):
    args = [dtrain, "train", "--model", "resnet-20", "--workers", str(REPLICAS), "--batch-size", str(batch),
            "--epochs", str(epochs), "--schedule", "cosine", "--seed", "0", "--progress", "off",
            "--optimizer", "sgd", "--lr", f"{0.1 * REPLICAS * batch / 128:.6g}", "--momentum", "0.9",
            "--weight-decay", "5e-4"]
    if sync:
        args.append("--sync-bn")
    return args


def done(path):
    return {(r["batch_per_replica"], r["sync_bn"], r["epochs"]) for r in rows(path)}


def run(a):
    seen = done(a.out)
    for batch in [int(b) for b in a.batches.split(",")]:
        for sync in (False, True):
            if (batch, sync, a.epochs) in seen:
                continue
            args = command(a.dtrain, batch, sync, a.epochs)
            print(f"syncbn: {REPLICAS} x {batch}, sync_bn={sync}: {' '.join(args)}", file=sys.stderr, flush=True)
            if a.dry_run:
                continue
            res, seconds = run_dtrain(args, f"{REPLICAS} x {batch} sync_bn={sync}", "syncbn.py")
            row = {"replicas": REPLICAS, "batch_per_replica": batch, "sync_bn": sync, "epochs": a.epochs,
                   "steps": res["steps"], "test_accuracy": res["test_accuracy"], "test_loss": res["test_loss"],
                   "samples_per_s": res["samples_per_s"], "step_ms": 1e3 * REPLICAS * batch / res["samples_per_s"],
                   "threads": res.get("threads"), "seconds": seconds, "command": " ".join(args[1:])}
            append_row(a.out, row)
            print(f"syncbn: {REPLICAS} x {batch} sync_bn={sync}: accuracy {row['test_accuracy']:.4f}, "
                  f"{row['step_ms']:.1f} ms/step", file=sys.stderr, flush=True)


def table(path):
    by = {(r["batch_per_replica"], r["sync_bn"]): r for r in rows(path)}
    print("| replicas x batch | BN accuracy | SyncBN accuracy | BN ms/step | SyncBN ms/step |")
    print("|---|---|---|---|---|")
    for b in sorted({k[0] for k in by}):
        bn, sbn = by.get((b, False)), by.get((b, True))
        cell = lambda r, k, f: format(r[k], f) if r else ""
        print(f"| {REPLICAS} x {b} | {cell(bn, 'test_accuracy', '.4f')} | {cell(sbn, 'test_accuracy', '.4f')} | "
              f"{cell(bn, 'step_ms', '.1f')} | {cell(sbn, 'step_ms', '.1f')} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtrain", default="build/dtrain")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batches", default="4,8,16")
    ap.add_argument("--out", default="bench/syncbn.jsonl")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--table", metavar="JSONL")
    a = ap.parse_args()
    table(a.table) if a.table else run(a)


if __name__ == "__main__":
    main()
