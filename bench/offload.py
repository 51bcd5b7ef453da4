#!/usr/bin/python3
"""--offload, measured: the process's peak resident set (rss_peak_bytes, VmHWM),
the allocator's peak of the worst rank, the offloaded bytes and samples/s, for
each setting in alternating rounds (median samples/s).

Usage: bench/offload.py [--dtrain build/dtrain] [--model gpt-base] [--rounds 3]
                        [--steps 10] [--runs "1:none,1:optimizer,2/3:none,2/3:optimizer,2/3:params"]
A run is WORKERS[/ZERO]:OFFLOAD. Prints a markdown table."""
import argparse, json, os, statistics, subprocess, tempfile

ap = argparse.ArgumentParser()
ap.add_argument("--dtrain", default="build/dtrain")
ap.add_argument("--model", default="gpt-base")
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--steps", type=int, default=10)
ap.add_argument("--runs", default="1:none,1:optimizer,2/3:none,2/3:optimizer,2/3:params")
a = ap.parse_args()

text = os.path.join(tempfile.mkdtemp(), "text.txt")
with open(text, "w") as f:  # any text will do: memory and speed do not depend on it
    f.write("in the beginning god created the heaven and the earth. " * 4000)

def run(spec):
    workers, offload = spec.split(":")
    n, _, zero = workers.partition("/")
    cmd = [a.dtrain, "train", "--model", a.model, "--text-file", text, "--batch-size", "2",
           "--optimizer", "adam", "--max-steps", str(a.steps), "--eval-batches", "1",
           "--progress", "off", "--workers", n, "--offload", offload]
    if zero:
        cmd += ["--zero", zero]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])

specs = a.runs.split(",")
results = {s: [] for s in specs}
for _ in range(a.rounds):
    for s in specs:
        results[s].append(run(s))

print("| workers | --zero | --offload | rss_peak_bytes | allocator peak (worst rank) | offloaded (per rank) | samples/s (median) |")
print("|---|---|---|---|---|---|---|")
for s in specs:
    rs = results[s]
    workers, offload = s.split(":")
    n, _, zero = workers.partition("/")
    last = rs[-1]
    peak = max(r["peak"] for r in last["memory_per_rank"])
    off = max(r["offloaded"] for r in last["memory_per_rank"])
    rss = statistics.median(r["rss_peak_bytes"] for r in rs)
    sps = statistics.median(r["samples_per_s"] for r in rs)
    print(f"| {n} | {zero or '-'} | {offload} | {rss / 1e6:.1f} MB | {peak / 1e6:.1f} MB | "
          f"{off / 1e6:.1f} MB | {sps:.2f} |", flush=True)
