#!/usr/bin/python3
"""ZeRO's Figure 1, measured: model-state bytes per rank (parameters + gradients +
optimizer state, from the final line's memory_per_rank) for plain allreduce and
--zero 1, 2, 3 at N local workers, against 16P, 8P + 8P/N, 4P + 12P/N, 16P/N
(fp32, Adam), and bytes sent per step against plain allreduce.

Usage: bench/zero_figure1.py [--dtrain build/dtrain] [--models mlp,gpt-small] [--workers 2,4,8]
Prints a markdown table (worst rank per run)."""
import argparse, json, os, subprocess, tempfile

ap = argparse.ArgumentParser()
ap.add_argument("--dtrain", default="build/dtrain")
ap.add_argument("--models", default="mlp,gpt-small")
ap.add_argument("--workers", default="2,4,8")
ap.add_argument("--steps", type=int, default=3)
a = ap.parse_args()

text = os.path.join(tempfile.mkdtemp(), "text.txt")
with open(text, "w") as f:  # any text will do: memory does not depend on it
    f.write(("in the beginning god created the heaven and the earth. " * 4000))

def args(model):
    if model.startswith("gpt"):
        return ["--model", model, "--text-file", text, "--batch-size", "2", "--eval-batches", "1",
                "--optimizer", "adam"]
    return ["--model", model, "--dataset", "synthetic", "--synthetic-size", "512", "--batch-size", "16",
            "--optimizer", "adam"]

def run(model, n, stage):
    cmd = [a.dtrain, "train", *args(model), "--workers", str(n), "--max-steps", str(a.steps),
           "--progress", "off", "--zero", str(stage)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])

print("| model | N | run | model states per rank (worst) | formula | ratio | bytes sent/step vs allreduce |")
print("|---|---|---|---|---|---|---|")
for model in a.models.split(","):
    for n in map(int, a.workers.split(",")):
        plain = None
        for stage in (0, 1, 2, 3):
            j = run(model, n, stage)
            ranks = j["memory_per_rank"]
            states = max(r["parameters"] + r["gradients"] + r["optimizer_state"] for r in ranks)
            if plain is None:
                plain = j
                p = j["parameters"] if isinstance(j.get("parameters"), int) else j["allreduce_bytes"] / 4
            formula = [16 * p, 8 * p + 8 * p / n, 4 * p + 12 * p / n, 16 * p / n][stage]
            sent = j["bytes_sent_per_worker"] / plain["bytes_sent_per_worker"]
            name = ["allreduce", "--zero 1", "--zero 2", "--zero 3"][stage]
            print(f"| {model} | {n} | {name} | {states / 2**20:.2f} MiB | "
                  f"{formula / 2**20:.2f} MiB | {states / formula:.3f} | {sent:.3f} |", flush=True)
