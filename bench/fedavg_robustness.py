#!/usr/bin/python3
"""Robustness table: test accuracy of dtrain's simulated FedAvg after R rounds per
aggregator and attack, 0 to 30% malicious clients (100 clients, C = 0.1, E = 1, B = 10,
IID Fashion-MNIST). Prints a markdown table.
Usage: fedavg_robustness.py [model] [rounds] [byzantine f for krum]"""
import json, subprocess, sys

model = sys.argv[1] if len(sys.argv) > 1 else "mlp"
rounds = sys.argv[2] if len(sys.argv) > 2 else "30"
f = sys.argv[3] if len(sys.argv) > 3 else "3"
aggregators = ["mean", "median", "trimmed-mean", "krum", "multi-krum"]
cases = [("none", 0.0)] + [(a, frac) for a in ("sign-flip", "gaussian", "scale", "label-flip") for frac in (0.1, 0.3)]

def accuracy(agg, attack, frac):
    cmd = ["./build/dtrain", "train", "--strategy", "fedavg", "--model", model, "--clients", "100",
           "--client-fraction", "0.1", "--local-epochs", "1", "--local-batch", "10", "--lr", "0.05",
           "--rounds", rounds, "--eval-every", rounds, "--aggregator", agg, "--byzantine", f,
           "--trim-fraction", "0.3", "--workers", "2", "--progress", "off"]
    if attack != "none":
        cmd += ["--attack", attack, "--attackers", str(frac)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    return json.loads(out)["test_accuracy"]

print("| attack | attackers | " + " | ".join(aggregators) + " |")
print("|---|---|" + "---|" * len(aggregators))
for attack, frac in cases:
    row = [f"{accuracy(a, attack, frac):.3f}" for a in aggregators]
    print(f"| {attack} | {int(frac * 100)}% | " + " | ".join(row) + " |", flush=True)
