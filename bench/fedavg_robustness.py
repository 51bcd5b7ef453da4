#!/usr/bin/python3
"""Robustness table: test accuracy of dtrain's simulated FedAvg after R rounds per
aggregator and attack, 0 to 30% malicious clients (100 clients, C = 0.1, E = 1, B = 10,
IID Fashion-MNIST). Prints a markdown table.
Usage: fedavg_robustness.py [model] [rounds] [byzantine f for krum] [attack:fraction,...]"""
import json, subprocess, sys

model = sys.argv[1] if len(sys.argv) > 1 else "mlp"
rounds = sys.argv[2] if len(sys.argv) > 2 else "30"
f = sys.argv[3] if len(sys.argv) > 3 else "3"
aggregators = ["mean", "median", "trimmed-mean", "krum", "multi-krum"]
cases = [("none", 0.0), ("sign-flip", 0.1)] + [(a, 0.3) for a in ("sign-flip", "gaussian", "scale", "label-flip")]
if len(sys.argv) > 4:  # only these attacks (comma-separated), e.g. to finish a table
    cases = [c for c in cases if f"{c[0]}:{c[1]}" in sys.argv[4].split(",")]

def accuracy(agg, attack, frac):
    cmd = ["./build/dtrain", "train", "--strategy", "fedavg", "--model", model, "--clients", "100",
           "--client-fraction", "0.1", "--local-epochs", "1", "--local-batch", "10", "--lr", "0.05",
           "--rounds", rounds, "--eval-every", rounds, "--aggregator", agg, "--byzantine", f,
           "--trim-fraction", "0.3", "--workers", "2", "--progress", "off"]
    if attack != "none":
        cmd += ["--attack", attack, "--attackers", str(frac)]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:  # the model diverged (NaN): dtrain stops with an error
        return None
    return json.loads(run.stdout.strip().splitlines()[-1])["test_accuracy"]

print("| attack | attackers | " + " | ".join(aggregators) + " |")
print("|---|---|" + "---|" * len(aggregators))
for attack, frac in cases:
    row = [(lambda a: "diverged" if a is None else f"{a:.3f}")(accuracy(g, attack, frac)) for g in aggregators]
    print(f"| {attack} | {int(frac * 100)}% | " + " | ".join(row) + " |", flush=True)
